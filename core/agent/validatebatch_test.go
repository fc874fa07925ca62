package agent_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// historyOfASession runs a session with tools, a steer, a queued followUp,
// a cancelled nextRun and a fork, and returns every batch it committed.
func historyOfASession(t *testing.T) []inboxBatch {
	t.Helper()
	var batches []inboxBatch
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		rec := newInboxRecorder()
		a := openAgent(t, ctx, s, agentOptions{store: rec})
		a.faux.SetResponses(calls("a", "b"), answer("done"), answer("followed up"), answer("on the fork"))
		c := a.h.Root()
		must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		must(c.Steer(ctx, userText("focus")))
		must(c.FollowUp(ctx, userText("then this")))
		next := must(c.NextRun(ctx, userText("later")))
		must(c.CancelQueued(ctx, next))
		if got := must(c.Drive(ctx)); got != core.Idle {
			t.Fatalf("drive = %q", got)
		}
		page := must(a.h.Entries(ctx, c.ID, storage.Cursor{Limit: 100}))
		fork := must(c.Fork(ctx, page.Items[2].ID, core.ForkOptions{}))
		must(fork.Accept(ctx, userText("fork"), agent.AcceptOptions{}))
		must(a.h.Drive(ctx))
		batches = rec.batches
		if err := a.h.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
	return batches
}

// replayValidating applies batches to a fresh store in order, validating
// each against the state before it; it returns the index of the first
// rejected batch and its error.
func replayValidating(t *testing.T, batches []inboxBatch) (int, error) {
	t.Helper()
	ctx := context.Background()
	store := memory.New()
	for i, b := range batches {
		if err := agent.ValidateBatch(ctx, store, b.batch); err != nil {
			return i, err
		}
		if err := store.Apply(ctx, b.batch, b.rng.First); err != nil {
			t.Fatalf("batch %d does not apply: %v", i, err)
		}
	}
	return -1, nil
}

// Every batch a session commits passes ValidateBatch against the state
// before it, and a batch edited to break a rule is rejected naming it.
func TestValidateBatchAcceptsAHistoryAndRejectsBrokenBatches(t *testing.T) {
	history := historyOfASession(t)
	if i, err := replayValidating(t, history); err != nil {
		t.Fatalf("batch %d of a real session is rejected: %v", i, err)
	}
	// find returns the first batch with a write that match accepts, and the
	// write's index.
	find := func(match func(storage.Write) bool) (int, int) {
		for i, b := range history {
			if j := slices.IndexFunc(b.batch.Writes, match); j >= 0 {
				return i, j
			}
		}
		t.Fatal("the session has no such write")
		return 0, 0
	}
	clone := func() []inboxBatch {
		out := slices.Clone(history)
		for i := range out {
			out[i].batch.Writes = slices.Clone(out[i].batch.Writes)
		}
		return out
	}
	result := func(status string) func(storage.Write) bool {
		return func(w storage.Write) bool {
			return w.Type == storage.WriteValueSet && w.Addr.Namespace == agent.InputResultValue.Namespace &&
				bytes.Contains(w.Value, []byte(`"status":"`+status+`"`))
		}
	}
	for _, c := range []struct {
		name  string
		rule  core.Rule
		match func(storage.Write) bool
		edit  func(w *storage.Write) // nil: remove the write
	}{
		{"a finished input goes back to queued", agent.RuleInputResult, result("done"), func(w *storage.Write) {
			w.Value = bytes.Replace(w.Value, []byte(`"done"`), []byte(`"queued"`), 1)
		}},
		{"an inbox element leaves without its result", agent.RuleInputResult, result("cancelled"), nil},
		{"a head names a later entry", core.RuleHeadNotVisible, func(w storage.Write) bool {
			return w.Type == storage.WriteEntry && w.Entry.Kind == core.AssistantKind.Kind()
		}, func(w *storage.Write) {
			e := *w.Entry
			e.Head = e.ID + 1000
			w.Entry = &e
		}},
		{"an edit targets the entry itself", core.RuleEditTarget, func(w storage.Write) bool {
			return w.Type == storage.WriteEntry && w.Entry.Kind == core.AssistantKind.Kind()
		}, func(w *storage.Write) {
			e := *w.Entry
			e.Edits = []storage.ContextEdit{{Target: e.ID}}
			w.Entry = &e
		}},
		{"a task depends on itself", core.RuleDependency, func(w storage.Write) bool {
			return w.Type == storage.WriteTask && w.Task.Kind == agent.PostToolsKindName
		}, func(w *storage.Write) {
			task := *w.Task
			task.After = []storage.ID{task.ID}
			w.Task = &task
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			broken := clone()
			i, j := find(c.match)
			if c.edit == nil {
				broken[i].batch.Writes = slices.Delete(broken[i].batch.Writes, j, j+1)
				// The sequences after the removed write move down by one.
				broken = broken[:i+1]
			} else {
				c.edit(&broken[i].batch.Writes[j])
			}
			at, err := replayValidating(t, broken)
			var ce *core.CommitError
			if at != i || !errors.As(err, &ce) || ce.Rule != c.rule {
				t.Fatalf("rejected batch %d with %v; want batch %d rejected by %s", at, err, i, c.rule)
			}
		})
	}
}
