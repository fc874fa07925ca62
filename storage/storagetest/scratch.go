package storagetest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/storage"
)

// scratchTests are a task's scratch scope (reference §4.6).
var scratchTests = []test{
	{"SettleRetiresTheTasksScratch", testSettleRetiresScratch},
	{"ScratchListsExposeOnlyCurrentContents", testScratchList},
}

func testSettleRetiresScratch(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	task := x.task(c, "generation")
	other := x.task(c, "generation")
	x.commit()
	checkpoint := storage.ScratchValue[string]("checkpoint").In(task).WithKey("latest").Address
	frames := storage.ScratchList[string]("frames").In(task).Address
	otherFrames := storage.ScratchList[string]("frames").In(other).Address
	x = s.scratchTx(task)
	x.set(checkpoint, "cp")
	x.push(frames, "f1")
	x.push(frames, "f2")
	x.commit()
	x = s.scratchTx(other)
	x.push(otherFrames, "g1")
	x.commit()

	if got := s.str(checkpoint, 0); got != "cp" {
		t.Errorf("checkpoint while live = %q; want %q", got, "cp")
	}
	if got := s.list(frames, 0); !cmp.Equal(got, []string{"f1", "f2"}) {
		t.Errorf("frames while live = %q; want [f1 f2]", got)
	}
	scope := storage.ScratchScope(task)
	if got := s.scanValues(storage.ValueQuery{Scope: scope, Namespace: "checkpoint", Limit: 10}).Items; len(got) != 1 {
		t.Errorf("ScanValues of the live scratch = %v; want one value", got)
	}

	x = s.tx()
	x.entry(c, "assistant")
	x.settle(task, "done")
	x.commit()

	if got := s.str(checkpoint, 0); got != absent {
		t.Errorf("checkpoint after settle = %q; want absent", got)
	}
	if got := s.list(frames, 0); len(got) != 0 {
		t.Errorf("frames after settle = %q; want []", got)
	}
	if got := s.scanValues(storage.ValueQuery{Scope: scope, Namespace: "checkpoint", Limit: 10}).Items; len(got) != 0 {
		t.Errorf("ScanValues of the retired scratch = %v; want none", got)
	}
	if got := s.list(otherFrames, 0); !cmp.Equal(got, []string{"g1"}) {
		t.Errorf("another task's frames = %q; want [g1]: settle retires only its own task's scratch", got)
	}

	x = s.scratchTx(task)
	x.push(frames, "late")
	be := x.reject()
	if be.Index != -1 || !strings.Contains(be.Rule, "task "+n(task)) {
		t.Errorf("a late scratch batch: %v; want the batch rejected as a whole, naming task %d", be, task)
	}
	if got := s.list(frames, 0); len(got) != 0 {
		t.Errorf("frames after a late scratch batch = %q; want []", got)
	}
}

func testScratchList(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	task := x.task(c, "tool")
	x.commit()
	out := storage.ScratchList[string]("output").In(task).Address
	x = s.scratchTx(task)
	x.push(out, "a")
	b := x.push(out, "b")
	x.commit()
	x = s.scratchTx(task)
	x.remove(out, b)
	x.push(out, "c")
	x.commit()
	if got, want := s.list(out, 0), []string{"a", "c"}; !cmp.Equal(got, want) {
		t.Errorf("scratch list after a remove = %q; want %q", got, want)
	}
	x = s.scratchTx(task) // a retry starts clean
	x.clear(out)
	x.push(out, "retry")
	x.commit()
	if got, want := s.list(out, 0), []string{"retry"}; !cmp.Equal(got, want) {
		t.Errorf("scratch list after a clear = %q; want %q", got, want)
	}
}
