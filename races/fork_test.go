package races

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/storage"
)

// stickyMode is a sticky (not rewindable) conversation value, which a fork
// does not inherit unless ForkOptions.Values carries it.
var stickyMode = storage.Address{Scope: storage.ConversationScope(0), Namespace: "race", Key: "mode"}

// forkAtStartRacesAWrite: a fork at the start of the root, carrying a
// sticky value, races a commit that appends to the root and rewrites that
// value (§9.1). The fork is one commit, so it sees the source as of its own
// place on the line. Forward: the fork first, so it carries the old value.
// Reverse: the write first, so it carries the new one. Either way the fork
// holds none of the source's entries, and the source's later write never
// reaches it.
func forkAtStartRacesAWrite(o order) cell {
	points := map[order][]string{
		forward: {"forker:lock:line", "writer:lock:line"},
		reverse: {"writer:lock:line", "forker:lock:line"},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		var (
			forkMode, sourceMode string
			carried              bool
			inherited            []storage.ID
			fork                 storage.ID
		)
		main := func(ctx context.Context) {
			h := openSession(ctx, s, nil)
			c := h.Root()
			must(0, c.Value(stickyMode).Set(ctx, json.RawMessage(`"old"`)))
			g := newGroup(s.Runtime())
			g.Go(ctx, "forker", func(ctx context.Context) {
				fork = must(c.Fork(ctx, core.ForkStart, core.ForkOptions{Values: []storage.Address{stickyMode}})).ID
			})
			g.Go(ctx, "writer", func(ctx context.Context) {
				must(c.Commit(ctx, func(tx *core.ConversationTx) error {
					core.AppendUser(tx.Tx, rootID, ai.UserText("after", 0))
					rootMode := stickyMode
					rootMode.Scope.ID = rootID
					tx.SetValue(rootMode, "new")
					return nil
				}))
			})
			g.Wait(ctx)
			fc := must(h.Conversation(ctx, fork))
			forkMode, carried = modeOf(ctx, fc)
			sourceMode, _ = modeOf(ctx, c)
			for _, e := range must(h.Entries(ctx, fork, storage.Cursor{})).Items {
				if e.ConversationID == rootID {
					inherited = append(inherited, e.ID)
				}
			}
			check(h.Close(ctx))
		}
		verify := func() error {
			want := map[order]string{forward: "old", reverse: "new"}[o]
			switch {
			case !carried || forkMode != want:
				return fmt.Errorf("the fork carries %q (present %v); want %q, the source's value where the fork took the line", forkMode, carried, want)
			case sourceMode != "new":
				return fmt.Errorf("the source holds %q; want the write's \"new\"", sourceMode)
			case len(inherited) > 0:
				return fmt.Errorf("a fork at the start holds source entries %v; want none", inherited)
			}
			return nil
		}
		return main, verify
	}}
}

// modeOf reads stickyMode in c, through the conversation's value handle.
func modeOf(ctx context.Context, c *core.Conversation) (string, bool) {
	raw, ok, err := c.Value(stickyMode).Get(ctx)
	check(err)
	var mode string
	if ok {
		check(json.Unmarshal(raw, &mode))
	}
	return mode, ok
}
