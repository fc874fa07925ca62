package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// The cached context must equal a fresh derivation after every commit:
// random histories of plain entries, entries without a model, heads (self
// and earlier boundaries), omit and replace edits, and forks continued
// independently.
func TestCachedContextEqualsAFreshDerivation(t *testing.T) {
	const seeds, steps = 100, 40
	for seed := uint64(1); seed <= seeds; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		ctx := context.Background()
		store := memory.New()
		h, err := Open(ctx, store, Options{})
		if err != nil {
			t.Fatal(err)
		}
		convs := []storage.ID{h.root}
		for step := range steps {
			conv := convs[rng.IntN(len(convs))]
			_, err := h.Commit(ctx, func(tx *Tx) error {
				cur, err := DeriveContext(ctx, store, conv, 0)
				if err != nil {
					return err
				}
				ids := cur.IDs()
				msg := []ai.Message{ai.UserText(fmt.Sprintf("m%d", step), 0)}
				switch r := rng.IntN(10); {
				case r < 5:
					tx.Entry(UserKind, conv, EntryDraft{Model: msg})
				case r == 5:
					tx.Entry(NoticeKind, conv, EntryDraft{Data: map[string]int{"step": step}})
				case r == 6:
					tx.Entry(ResetKind, conv, EntryDraft{Head: HeadSelf})
				case r == 7 && len(ids) > 0:
					// A summary-like head: an earlier boundary, never before the current one.
					b := ids[rng.IntN(len(ids))]
					if cur.Head != nil && b < cur.Head.Head {
						b = cur.Head.Head
					}
					tx.Entry(SummaryKind, conv, EntryDraft{Model: msg, Head: b})
				case r == 8 && len(ids) > 0:
					ed := storage.ContextEdit{Target: ids[rng.IntN(len(ids))], Action: storage.EditOmit}
					if rng.IntN(2) == 0 {
						ed = storage.ContextEdit{Target: ed.Target, Action: storage.EditReplace, Messages: msg}
					}
					tx.Entry(NoticeKind, conv, EntryDraft{Edits: []storage.ContextEdit{ed}})
				case r == 9 && len(ids) > 0:
					convs = append(convs, tx.Fork(conv, ids[rng.IntN(len(ids))]))
				default:
					tx.Entry(AssistantKind, conv, EntryDraft{Model: msg})
				}
				return nil
			})
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if err := h.line.Read(ctx, func(ctx context.Context) error {
				for _, c := range convs {
					want, err := DeriveContext(ctx, store, c, 0)
					if err != nil {
						return err
					}
					got, err := h.currentContext(ctx, store, c)
					if err != nil {
						return err
					}
					if diff := cmp.Diff(want, got); diff != "" {
						return fmt.Errorf("conversation %d (-fresh +cached):\n%s", c, diff)
					}
				}
				return nil
			}); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
		}
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
