package races

import (
	"context"
	"fmt"

	"github.com/pico-go/pico/core/boundary"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/storage"
)

// repeatedBoundaryDelivery: the same typed clear is delivered twice at once
// (a provider's retry, two hook handlers), by hosts A and B (DESIGN §11).
// Both are delivered, then, forward, A's commit takes the line first;
// reverse, B's. Either way
// there is one boundary: one new conversation, one provider_boundary
// entry, and both deliveries report the same binding, the second one
// unchanged.
func repeatedBoundaryDelivery(o order) cell {
	points := map[order][]string{
		forward: {"a:deliver", "b:deliver", "a:lock:line", "b:lock:line"},
		reverse: {"a:deliver", "b:deliver", "b:lock:line", "a:lock:line"},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		var trs [2]boundary.Transition
		var convs, entries int
		main := func(ctx context.Context) {
			a := openAgent(ctx, s, agentOptions{})
			clear := boundary.Boundary{Kind: boundary.Clear, Provider: boundary.Claude, SessionID: "new-thread", Source: "clear"}
			must(boundary.Apply(ctx, a.h.Harness, boundary.Boundary{Kind: boundary.Startup, Provider: boundary.Claude, SessionID: "first-thread", Source: "startup"}))
			g := newGroup(s.Runtime())
			for i, name := range []string{"a", "b"} {
				g.Go(ctx, name, func(ctx context.Context) {
					sim.Yield(ctx, "deliver")
					trs[i] = must(boundary.Apply(ctx, a.h.Harness, clear))
				})
			}
			g.Wait(ctx)
			all := must(storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
				return a.h.Store().ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
			}))
			convs = len(all)
			for _, c := range all {
				page := must(a.h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 10}, ConversationID: c.ID, Kind: boundary.EntryKind.Kind()}))
				entries += len(page.Items)
			}
			check(a.h.Close(ctx))
		}
		verify := func() error {
			first, second := trs[0], trs[1]
			if o == reverse {
				first, second = second, first
			}
			switch {
			case convs != 2 || entries != 1:
				return fmt.Errorf("%d conversations and %d provider_boundary entries; want the root and one new conversation with one", convs, entries)
			case !first.Changed || second.Changed || first.Binding != second.Binding:
				return fmt.Errorf("deliveries %+v then %+v; want the first to change things and the second to report the same binding", first, second)
			}
			return nil
		}
		return main, verify
	}}
}
