package races

import (
	"context"
	"fmt"
	"slices"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/storage"
)

// watchRegistrationRacesCommit: a watch registers while another caller
// commits an entry (§9.4). Forward: the watch takes the line first, so its
// base lacks the entry and the stream delivers it. Reverse: the commit takes
// the line first, so the base holds it and no event repeats it. Either way
// the folded view holds the entry exactly once.
func watchRegistrationRacesCommit(o order) cell {
	points := map[order][]string{
		forward: {"watcher:lock:line", "writer:lock:line"},
		reverse: {"writer:lock:line", "watcher:lock:line"},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		var (
			entry       storage.ID
			inBase      bool
			delivered   int
			folded      *core.ConversationView
			contextHits int
		)
		main := func(ctx context.Context) {
			h := openSession(ctx, s, nil)
			var w *core.WatchHandle
			g := newGroup(s.Runtime())
			g.Go(ctx, "watcher", func(ctx context.Context) {
				w = must(h.Watch(ctx, rootID, core.WatchOptions{Tail: 10}))
			})
			g.Go(ctx, "writer", func(ctx context.Context) {
				must(h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
					entry = core.AppendUser(tx.Tx, rootID, ai.UserText("racing", 0))
					return nil
				}))
			})
			g.Wait(ctx)
			inBase = slices.ContainsFunc(w.View().Entries, func(e *storage.Entry) bool { return e.ID == entry })
			w.Start(ctx, func(e core.ConversationEvent) {
				if e.Type == core.EventEntry && e.Entry.ID == entry {
					delivered++
				}
			})
			for i := 0; i < 1000 && w.View().ReadAt < h.Store().LastSeq(); i++ {
				check(s.Runtime().Sleep(ctx, 0))
			}
			folded = w.View()
			for _, id := range folded.Context {
				if id == entry {
					contextHits++
				}
			}
			check(h.Close(ctx))
		}
		verify := func() error {
			n := 0
			for _, e := range folded.Entries {
				if e.ID == entry {
					n++
				}
			}
			switch {
			case o == forward && (inBase || delivered != 1):
				return fmt.Errorf("registration first: base has the entry %v, delivered %d times; want absent, then delivered once", inBase, delivered)
			case o == reverse && (!inBase || delivered != 0):
				return fmt.Errorf("commit first: base has the entry %v, delivered %d times; want present, never delivered", inBase, delivered)
			case n != 1 || contextHits != 1:
				return fmt.Errorf("the folded view holds entry %d %d times and its context %d times; want once each", entry, n, contextHits)
			}
			return nil
		}
		return main, verify
	}}
}
