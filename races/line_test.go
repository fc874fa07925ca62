package races

import (
	"context"
	"errors"
	"fmt"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/storage"
)

// nestedCommitWhileAnotherWaits: a plan calls Commit from inside itself
// while another caller waits for the line. The nested call would wait on the
// line its own caller holds; it is refused at once with ErrNestedLineCall,
// the outer plan commits what it wrote, and the waiting caller commits after
// it (forward) or before it (reverse). Close returns: nothing is left
// holding the line.
func nestedCommitWhileAnotherWaits(o order) cell {
	points := map[order][]string{
		forward: {"nester:lock:line", "other:lock:line"},
		reverse: {"other:lock:line", "nester:lock:line"},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		var (
			nested        error
			outer, second storage.Range
			texts         []string
		)
		main := func(ctx context.Context) {
			h := openSession(ctx, s, nil)
			c := h.Root()
			g := newGroup(s.Runtime())
			g.Go(ctx, "nester", func(ctx context.Context) {
				outer = must(c.Commit(ctx, func(tx *core.ConversationTx) error {
					_, nested = c.Commit(ctx, func(tx *core.ConversationTx) error {
						core.AppendUser(tx.Tx, rootID, ai.UserText("nested", 0))
						return nil
					})
					core.AppendUser(tx.Tx, rootID, ai.UserText("outer", 0))
					return nil
				}))
			})
			g.Go(ctx, "other", func(ctx context.Context) {
				second = must(c.Commit(ctx, func(tx *core.ConversationTx) error {
					core.AppendUser(tx.Tx, rootID, ai.UserText("other", 0))
					return nil
				}))
			})
			g.Wait(ctx)
			for _, e := range must(h.Entries(ctx, rootID, storage.Cursor{})).Items {
				if e.Kind == core.UserKind.Kind() {
					texts = append(texts, e.Model[0].Content.TextOf())
				}
			}
			check(h.Close(ctx))
		}
		verify := func() error {
			want := map[order][]string{forward: {"outer", "other"}, reverse: {"other", "outer"}}[o]
			switch {
			case !errors.Is(nested, core.ErrNestedLineCall):
				return fmt.Errorf("the nested commit returned %v; want ErrNestedLineCall", nested)
			case outer.First != outer.Last || second.First != second.Last:
				return fmt.Errorf("the outer plan committed %+v and the other caller %+v; want one entry each", outer, second)
			case fmt.Sprint(texts) != fmt.Sprint(want):
				return fmt.Errorf("the root holds user entries %q; want %q: the nested entry never, the two commits in line order", texts, want)
			}
			return nil
		}
		return main, verify
	}}
}
