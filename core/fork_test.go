package core_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
)

var model = storage.ConversationValue[string]("pi.model", storage.Rewind)

func (f *fixture) value(addr storage.Address, at ID) (string, bool) {
	f.t.Helper()
	v, ok, err := f.store.GetValue(f.ctx, addr, at)
	if err != nil {
		f.t.Fatalf("get %s at %d: %v", addr, at, err)
	}
	return string(v.Value), ok
}

func (f *fixture) fork(source, at ID) ID {
	f.t.Helper()
	var id ID
	f.commit(func(tx *core.Tx) { id = tx.Fork(source, at) })
	return id
}

func TestForkSeesWhatWasInForceAtItsEntry(t *testing.T) {
	f := newFixture(t)
	a := f.conversation()
	f.commit(func(tx *core.Tx) { core.TxValue(tx, model.In(a)).Set("opus") })
	f.at(10, userAt(a, "u10"))
	f.at(20, assistantAt(a, "a20"))
	f.at(30, userAt(a, "u30"))
	var answer ID
	f.commit(func(tx *core.Tx) {
		// Rewindable state before the entry of the same commit is in force at it.
		core.TxValue(tx, planMode.In(a)).Set(true)
		answer = core.AppendAssistant(tx, a, assistantMsg("a40"))
	})
	f.at(50, summaryAt(a, 20, 30))
	var edit ID
	f.commit(func(tx *core.Tx) {
		edit = tx.Entry(noteKind, a, core.EntryDraft{Edits: []storage.ContextEdit{{Target: 30, Action: storage.EditOmit}}})
	})
	forkAt := f.assistant(a, "a-final")
	// Everything below happens in A after the fork point.
	b := f.fork(a, forkAt)
	f.commit(func(tx *core.Tx) { core.TxValue(tx, model.In(a)).Set("sonnet") })
	f.commit(func(tx *core.Tx) { core.AppendReset(tx, a) })
	f.user(a, "later in A")

	wantContext(t, f.context(b, 0), 50, answer, edit, forkAt)
	if got, want := messageTexts(f.context(b, 0).Messages()), []string{"user:summary", "assistant:a40", "assistant:a-final"}; !slices.Equal(got, want) {
		t.Fatalf("fork messages = %v; want %v (head and edit in force at the fork)", got, want)
	}
	if v, _ := f.value(model.In(b).Address, 0); v != `"opus"` {
		t.Fatalf("fork model = %s; want the model in force at the fork, not the later change", v)
	}
	if v, ok := f.value(planMode.In(b).Address, 0); !ok || v != "true" {
		t.Fatalf("fork plan mode = %s, %v; want true (written in the fork entry's commit)", v, ok)
	}
	// A fork at the entry before the plan-mode commit does not see it.
	c := f.fork(a, 30)
	if v, ok := f.value(planMode.In(c).Address, 0); ok {
		t.Fatalf("fork at 30 sees plan mode %s; it was committed with entry %d", v, answer)
	}
	wantContext(t, f.context(c, 0), 10, 20, 30)
	// Continuing the fork leaves the source untouched.
	nb := f.user(b, "in B")
	wantContext(t, f.context(b, 0), 50, answer, edit, forkAt, nb)
	if last := f.context(a, 0).IDs(); slices.Contains(last, nb) {
		t.Fatalf("source context %v contains the fork's entry %d", last, nb)
	}
}

func TestForkOfAnIncompleteExchangeSuppliesResultsForTheRequestOnly(t *testing.T) {
	f := newFixture(t)
	a := f.conversation()
	f.user(a, "go")
	var asst, tool1, tool2 ID
	f.commit(func(tx *core.Tx) {
		asst = core.AppendAssistant(tx, a, assistantMsg("calling", call("A"), call("B")))
		tool1 = tx.Task(jobKind, core.TaskSpec{ConversationID: a})
		tool2 = tx.Task(jobKind, core.TaskSpec{ConversationID: a})
	})
	resA := f.at(f.store.LastSeq()+1, func(tx *core.Tx) ID { return core.AppendToolResult(tx, a, nil, toolResult("A", "a")) })
	f.commit(func(tx *core.Tx) { core.AppendToolResult(tx, a, nil, toolResult("B", "b")) })

	// Any entry is a fork point, including one of several results.
	b := f.fork(a, resA)
	req, err := f.context(b, 0).Request()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user:go", "assistant:calling", "toolResult:a@A", "toolResult:No result provided@B"}
	if got := messageTexts(req); !slices.Equal(got, want) {
		t.Fatalf("fork request = %v; want %v", got, want)
	}
	if got := f.context(b, 0).IDs(); slices.Contains(got, resA+1) {
		t.Fatalf("fork context %v contains a result added after the fork", got)
	}
	// The supplied result is request-local: nothing was written.
	page, err := f.store.ScanEntries(f.ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 100}, ConversationID: b, Kind: "tool_result"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("fork tool results = %d, %v; want only the inherited one", len(page.Items), err)
	}
	// Tasks are never inherited.
	tasks, err := f.store.ScanTasks(f.ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: 100}, ConversationIDs: ids(b)})
	if err != nil || len(tasks.Items) != 0 {
		t.Fatalf("fork tasks = %v, %v; want none (source tasks %d, %d stay in the source)", tasks.Items, err, tool1, tool2)
	}
	// A fork at the assistant itself gets both results supplied.
	c := f.fork(a, asst)
	req, _ = f.context(c, 0).Request()
	if got := messageTexts(req); len(got) != 4 || got[2] != "toolResult:No result provided@A" {
		t.Fatalf("fork at the call = %v; want both results supplied", got)
	}
}

func TestDeepForkChainReadsThroughEveryCutoff(t *testing.T) {
	const depth = 60
	f := newFixture(t)
	root := f.conversation()
	f.commit(func(tx *core.Tx) { core.TxValue(tx, model.In(root)).Set("m0") })
	first := f.user(root, "root")
	conv, want := root, []ID{first}
	for i := 1; i <= depth; i++ {
		at := want[len(want)-1]
		// The source moves on after each fork point; none of it may leak.
		f.user(conv, fmt.Sprintf("after fork %d", i))
		f.commit(func(tx *core.Tx) { core.TxValue(tx, model.In(conv)).Set("leak") })
		conv = f.fork(conv, at)
		if i%10 == 0 {
			f.commit(func(tx *core.Tx) { core.TxValue(tx, model.In(conv)).Set(fmt.Sprintf("m%d", i)) })
		}
		want = append(want, f.user(conv, fmt.Sprintf("depth %d", i)))
	}
	wantContext(t, f.context(conv, 0), want...)
	if v, _ := f.value(model.In(conv).Address, 0); v != `"m60"` {
		t.Fatalf("deepest model = %s; want m60", v)
	}
	// Through an older position the value comes from the last level that set it.
	if v, _ := f.value(model.In(conv).Address, want[55]); v != `"m50"` {
		t.Fatalf("model at %d = %s; want m50", want[55], v)
	}
	if v, _ := f.value(model.In(conv).Address, want[5]); v != `"m0"` {
		t.Fatalf("model at %d = %s; want m0", want[5], v)
	}
}

func TestForkAtAnEntryItCannotSeeRejects(t *testing.T) {
	f := newFixture(t)
	a := f.conversation()
	other := f.conversation()
	e := f.user(other, "x")
	last := f.store.LastSeq()
	_, err := f.line.Commit(f.ctx, func(tx *core.Tx) error { tx.Fork(a, e); return nil })
	if core.RuleOf(err) != core.RuleStorage || f.store.LastSeq() != last {
		t.Fatalf("fork at a foreign entry = %v; want a storage rejection and nothing written", err)
	}
}

// Fork at ForkStart (the reference's "start") inherits nothing but its
// provenance, and ForkOptions.Values carries chosen values over, sticky
// ones included, as the source has them now (issue 23).
func TestForkAtTheStartAndCarriedValues(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := open(t, ctx, s, nil)
		c := h.Root()
		model := storage.ConversationValue[string]("app.model", storage.Sticky)
		mode := storage.ConversationValue[string]("app.mode", storage.Rewind)
		must(0, core.ValueOf(c, model).Set(ctx, "big"))
		must(0, core.ValueOf(c, mode).Set(ctx, "plan"))
		var first storage.ID
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			first = core.AppendUser(tx.Tx, tx.ID, ai.UserText("one", 0))
			core.AppendUser(tx.Tx, tx.ID, ai.UserText("two", 0))
			return nil
		}))

		bare := must(c.Fork(ctx, core.ForkStart, core.ForkOptions{}))
		rec := must(bare.Snapshot(ctx))
		if rec.Parent == nil || rec.Parent.ConversationID != c.ID || rec.Parent.At != 0 {
			t.Fatalf("fork record %+v; want provenance from %d at the start", rec, c.ID)
		}
		if cx := must(core.DeriveContext(ctx, h.Store(), bare.ID, 0)); len(cx.Entries) != 0 {
			t.Fatalf("a fork at the start derives %v; want nothing", cx.IDs())
		}
		if _, ok := read(core.ValueOf(bare, mode).Get(ctx)); ok {
			t.Fatal("a fork at the start inherited rewindable state")
		}
		forks := must(h.Conversations(ctx, core.ConversationFilter{Parent: c.ID}))
		if len(forks.Items) != 1 || forks.Items[0].ID != bare.ID {
			t.Fatalf("forks of the source = %+v; want the start fork", forks.Items)
		}
		must(bare.Commit(ctx, func(tx *core.ConversationTx) error { core.AppendUser(tx.Tx, tx.ID, ai.UserText("own", 0)); return nil }))
		if cx := must(core.DeriveContext(ctx, h.Store(), bare.ID, 0)); len(cx.Entries) != 1 {
			t.Fatalf("after its own entry the start fork derives %v; want that entry alone", cx.IDs())
		}

		must(0, core.ValueOf(c, mode).Set(ctx, "act"))
		carried := must(c.Fork(ctx, first, core.ForkOptions{Values: []storage.Address{model.Address, mode.Address}}))
		if got, _ := read(core.ValueOf(carried, model).Get(ctx)); got != "big" {
			t.Fatalf("carried sticky value = %q; want big", got)
		}
		if got, _ := read(core.ValueOf(carried, mode).Get(ctx)); got != "act" {
			t.Fatalf("carried rewindable value = %q; want the source's current act, not plan as of the fork point", got)
		}
		plain := must(c.Fork(ctx, first, core.ForkOptions{}))
		if _, ok := read(core.ValueOf(plain, model).Get(ctx)); ok {
			t.Fatal("a fork without Values inherited sticky state")
		}
		if got, _ := read(core.ValueOf(plain, mode).Get(ctx)); got != "plan" {
			t.Fatalf("a plain fork's rewindable value = %q; want plan, in force at the fork point", got)
		}
		last := h.Store().LastSeq()
		for _, bad := range []storage.Address{storage.SessionValue[int]("n").Address, mode.In(bare.ID).Address} {
			if _, err := c.Fork(ctx, first, core.ForkOptions{Values: []storage.Address{bad}}); err == nil {
				t.Fatalf("carrying %s was accepted", bad)
			}
		}
		if h.Store().LastSeq() != last {
			t.Fatal("a refused fork wrote")
		}
		must(0, h.Close(ctx))
	})
}
