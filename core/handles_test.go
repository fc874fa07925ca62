package core_test

import (
	"context"
	"slices"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
)

// State is read and written outside a commit through value and list
// handles on the harness and on conversations (§9.1, issue 23): a
// conversation handle binds an unbound conversation address to itself.
func TestValueAndListHandlesReadAndWriteOutsideACommit(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := open(t, ctx, s, nil)
		c := h.Root()
		name := storage.SessionValue[string]("app.name")
		mode := storage.ConversationValue[string]("app.mode", storage.Rewind)
		notes := storage.ConversationList[string]("app.notes", storage.Sticky)

		if _, ok := read(core.ValueOf(h, name).Get(ctx)); ok {
			t.Fatal("an unset value reads as set")
		}
		must(0, core.ValueOf(h, name).Set(ctx, "pico"))
		if got, _ := read(core.ValueOf(h, name).Get(ctx)); got != "pico" {
			t.Fatalf("session value = %q; want pico", got)
		}
		must(0, core.ValueOf(c, mode).Set(ctx, "plan"))
		var e storage.ID
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			e = core.AppendUser(tx.Tx, tx.ID, ai.UserText("x", 0))
			return nil
		}))
		must(0, core.ValueOf(c, mode).Set(ctx, "act"))
		if got, _ := read(core.ValueOf(c, mode).At(ctx, e)); got != "plan" {
			t.Fatalf("rewindable value as of entry %d = %q; want plan", e, got)
		}
		if raw, _ := read(c.Value(mode.Address).Get(ctx)); string(raw) != `"act"` {
			t.Fatalf("raw handle = %s; want \"act\"", raw)
		}
		if got := core.ValueOf(c, mode).Address(); got.Scope.ID != c.ID {
			t.Fatalf("bound address %v; want conversation %d", got, c.ID)
		}
		if _, _, err := core.ValueOf(h, mode).Get(ctx); err == nil {
			t.Fatal("an unbound conversation address read through the harness")
		}

		list := core.ListOf(c, notes)
		a := must(list.Append(ctx, "first"))
		must(list.Append(ctx, "second"))
		must(0, list.Remove(ctx, a))
		all := must(list.All(ctx))
		if len(all) != 1 || all[0].Value != "second" {
			t.Fatalf("list = %+v; want only second", all)
		}
		page, _, err := h.List(notes.In(c.ID).Address).Read(ctx, storage.ListQuery{})
		if err != nil || len(page) != 1 || !slices.Equal([]byte(page[0].Value), []byte(`"second"`)) {
			t.Fatalf("raw list page = %+v, %v", page, err)
		}
		must(0, list.Clear(ctx))
		if n := len(must(list.All(ctx))); n != 0 {
			t.Fatalf("%d elements after clear", n)
		}
		must(0, core.ValueOf(h, name).Delete(ctx))
		if _, ok := read(core.ValueOf(h, name).Get(ctx)); ok {
			t.Fatal("a deleted value reads as set")
		}
		must(0, h.Close(ctx))
	})
}

// read is must for a read that says whether it found something.
func read[T any](v T, ok bool, err error) (T, bool) {
	if err != nil {
		panic(err)
	}
	return v, ok
}
