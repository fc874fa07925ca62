package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
	"pgregory.net/rapid"
)

// watched is a started watch that records what it delivered.
type watched struct {
	w      *core.WatchHandle
	base   []byte // the initial view, as a thin client receives it
	events []core.ConversationEvent
}

func startWatch(t testing.TB, ctx context.Context, h *core.Harness, conv storage.ID, onEvent func(*watched, core.ConversationEvent)) *watched {
	t.Helper()
	w := must(h.Watch(ctx, conv, core.WatchOptions{Tail: 1000}))
	r := &watched{w: w, base: must(json.Marshal(w.View()))}
	w.Start(ctx, func(e core.ConversationEvent) {
		r.events = append(r.events, e)
		if onEvent != nil {
			onEvent(r, e)
		}
	})
	return r
}

// caughtUp yields until the watch has delivered every commit so far.
func caughtUp(ctx context.Context, s *sim.Sim, h *core.Harness, r *watched, last storage.ID) {
	for i := 0; i < 10_000 && r.w.View().ReadAt < last; i++ {
		must(0, s.Runtime().Sleep(ctx, 0))
	}
}

// viewsEqual fails t unless two views are equal as a client sees them.
func viewsEqual(t testing.TB, what string, want, got *core.ConversationView) {
	t.Helper()
	if diff := viewDiff(want, got); diff != "" {
		t.Fatalf("%s (-capture +folded):\n%s", what, diff)
	}
}

// viewDiff compares two views as a client sees them: their JSON.
func viewDiff(want, got *core.ConversationView) string {
	norm := func(v *core.ConversationView) map[string]any {
		var m map[string]any
		must(0, json.Unmarshal(must(json.Marshal(v)), &m))
		delete(m, "readAt") // commits that change nothing here raise only the capture's
		return m
	}
	return cmp.Diff(norm(want), norm(got), cmpopts.EquateEmpty())
}

// The fold is correct: after a session of turns with tools, steering, a
// queued write, a reset, an abort and a cancel, the view folded from the
// events equals a fresh capture, and so does a thin client's fold of the
// JSON event stream with no kinds registered.
func TestFoldedViewEqualsAFreshCaptureAndAThinClientFold(t *testing.T) {
	sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(calls("a", "b"), answer("first").WithDelay(time.Second), answer("second"), answer("never").WithDelay(time.Hour))
		c := a.h.Root()
		r := startWatch(t, ctx, a.h, c.ID, nil)
		done := s.Runtime().NewEvent("turn")
		must(c.Accept(ctx, userText("go"), core.AcceptOptions{}))
		s.Runtime().Go(ctx, "driver", func(ctx context.Context) { must(c.Drive(ctx)); done.Set() })
		must(c.Steer(ctx, userText("steer")))
		must(c.Write(ctx, core.NoticeKind, core.EntryDraft{Data: map[string]string{"note": "n"}}))
		q := must(c.FollowUp(ctx, userText("later")))
		if s.Rand().IntN(2) == 0 {
			must(c.CancelQueued(ctx, q))
		}
		must(0, done.Wait(ctx))
		must(c.Commit(ctx, func(tx *core.ConversationTx) error { core.AppendReset(tx.Tx, c.ID); return nil }))
		must(c.Accept(ctx, userText("stuck"), core.AcceptOptions{}))
		done2 := s.Runtime().NewEvent("turn2")
		s.Runtime().Go(ctx, "driver2", func(ctx context.Context) { must(c.Drive(ctx)); done2.Set() })
		must(0, s.Runtime().Sleep(ctx, time.Duration(s.Rand().IntN(3000))*time.Millisecond))
		must(0, c.Abort(ctx))
		must(0, done2.Wait(ctx))

		caughtUp(ctx, s, a.h, r, a.h.Store().LastSeq())
		fresh := must(a.h.Watch(ctx, c.ID, core.WatchOptions{Tail: 1000}))
		viewsEqual(t, "folded view", fresh.View(), r.w.View())
		fresh.Unsubscribe()

		// A thin client: the base and the events as JSON, folded with no
		// harness at all.
		var thin core.ConversationView
		must(0, json.Unmarshal(r.base, &thin))
		for _, e := range r.events {
			var decoded core.ConversationEvent
			must(0, json.Unmarshal(must(json.Marshal(e)), &decoded))
			must(0, core.ApplyEvent(&thin, decoded))
		}
		viewsEqual(t, "thin client's view", fresh.View(), &thin)
		for i := 1; i < len(r.events); i++ {
			if r.events[i].ReadAt < r.events[i-1].ReadAt {
				t.Fatalf("event %d (commit %d) delivered after commit %d: events must arrive in commit order", i, r.events[i].ReadAt, r.events[i-1].ReadAt)
			}
		}
		must(0, a.h.Close(ctx))
	})
}

func TestIdleAcceptEmitsNoInboxEventWhileQueuedInputDoes(t *testing.T) {
	simRun(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(answer("one").WithDelay(time.Second), answer("two"))
		c := a.h.Root()
		r := startWatch(t, ctx, a.h, c.ID, nil)
		must(c.Accept(ctx, userText("idle"), core.AcceptOptions{}))
		done := s.Runtime().NewEvent("turn")
		s.Runtime().Go(ctx, "driver", func(ctx context.Context) { must(c.Drive(ctx)); done.Set() })
		busy := must(c.Accept(ctx, userText("busy"), core.AcceptOptions{}))
		must(0, done.Wait(ctx))
		caughtUp(ctx, s, a.h, r, a.h.Store().LastSeq())
		var ops []core.InboxOp
		for _, e := range r.events {
			if e.Type == core.EventInbox {
				ops = append(ops, e.Inbox...)
			}
		}
		if len(ops) != 2 || ops[0].Type != "append" || ops[0].Item.ID != busy || ops[1].Type != "remove" || ops[1].ID != busy {
			t.Fatalf("inbox ops = %+v; want only the busy input's append and, when it landed, its remove", ops)
		}
		must(0, a.h.Close(ctx))
	})
}

// A listener that falls behind gets a fault, resnapshots from inside the
// listener without deadlock, and the watch goes on from the new view.
func TestLaggingWatchFaultsThenResnapshotsFromInsideTheListener(t *testing.T) {
	simRun(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := open(t, ctx, s, nil)
		c := h.Root()
		faults, resnapped := 0, 0
		slow := true
		r := startWatch(t, ctx, h, c.ID, func(r *watched, e core.ConversationEvent) {
			if e.Type == core.EventFault {
				faults++
				must(r.w.Resnapshot(ctx))
				resnapped++
				slow = false
				return
			}
			if slow {
				must(0, s.Runtime().Sleep(ctx, time.Hour)) // a listener stuck behind
			}
		})
		for i := range 1100 {
			must(c.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]int{"i": i}})
				return nil
			}))
		}
		must(0, s.Runtime().Sleep(ctx, 2*time.Hour))
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]string{"after": "resnapshot"}})
			return nil
		}))
		caughtUp(ctx, s, h, r, h.Store().LastSeq())
		if faults != 1 || resnapped != 1 {
			t.Fatalf("faults %d, resnapshots %d; want one of each", faults, resnapped)
		}
		fresh := must(h.Watch(ctx, c.ID, core.WatchOptions{Tail: 1000}))
		viewsEqual(t, "view after resnapshot and more events", fresh.View(), r.w.View())
		must(0, h.Close(ctx))
	})
}

func TestAPanickingListenerIsReportedAndUnsubscribedWithoutHarmingOthers(t *testing.T) {
	simRun(t, 1, func(ctx context.Context, s *sim.Sim) {
		var reports []error
		h := must(core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), Report: func(err error) { reports = append(reports, err) }}))
		c := h.Root()
		bad := startWatch(t, ctx, h, c.ID, func(*watched, core.ConversationEvent) { panic("renderer bug") })
		good := startWatch(t, ctx, h, c.ID, nil)
		for i := range 3 {
			must(c.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]int{"i": i}})
				return nil
			}))
		}
		caughtUp(ctx, s, h, good, h.Store().LastSeq())
		if n := countType(good.events, core.EventEntry); n != 3 {
			t.Fatalf("the healthy watch got %d entry events; want 3", n)
		}
		if len(bad.events) != 1 || len(reports) != 1 {
			t.Fatalf("panicking watch got %d events, %d reports; want one event, then unsubscribed and reported", len(bad.events), len(reports))
		}
		must(0, h.Close(ctx))
	})
}

func countType(es []core.ConversationEvent, typ string) int {
	n := 0
	for _, e := range es {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// Regression (an earlier prototype dropped late deltas): events committed
// between the capture and Start, and task outputs flushed after a task's
// start event, all reach the view.
func TestEventsBetweenCaptureAndStartAreDelivered(t *testing.T) {
	sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(answer("streamed answer with several words in it"))
		c := a.h.Root()
		w := must(a.h.Watch(ctx, c.ID, core.WatchOptions{Tail: 100}))
		must(c.Prompt(ctx, userText("go"), core.AcceptOptions{}))
		r := &watched{w: w}
		w.Start(ctx, func(e core.ConversationEvent) { r.events = append(r.events, e) })
		caughtUp(ctx, s, a.h, r, a.h.Store().LastSeq())
		if countType(r.events, core.EventTaskOutput) == 0 {
			t.Fatal("no task_output delivered: the stream's deltas were dropped")
		}
		fresh := must(a.h.Watch(ctx, c.ID, core.WatchOptions{Tail: 100}))
		viewsEqual(t, "view folded after a late start", fresh.View(), w.View())
		must(0, a.h.Close(ctx))
	})
}

// Closing the harness ends every watch with a closed event.
func TestCloseEndsWatchesWithClosed(t *testing.T) {
	simRun(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := open(t, ctx, s, nil)
		r := startWatch(t, ctx, h, h.Root().ID, nil)
		must(0, h.Close(ctx))
		for i := 0; i < 100 && len(r.events) == 0; i++ {
			must(0, s.Runtime().Sleep(ctx, 0))
		}
		if len(r.events) != 1 || r.events[0].Type != core.EventClosed {
			t.Fatalf("events = %+v; want one closed", r.events)
		}
		if _, err := h.Watch(ctx, h.Root().ID, core.WatchOptions{}); !errors.Is(err, core.ErrClosed) {
			t.Fatalf("watch after close = %v; want ErrClosed", err)
		}
	})
}

func TestConversationEventsHaveTheReferenceJSONShapes(t *testing.T) {
	cases := []struct {
		event core.ConversationEvent
		want  string
	}{
		{core.ConversationEvent{Type: core.EventTaskOutput, TaskID: 7, Ops: []delta.Op{delta.Append(delta.Path{"content", 0, "text"}, "hi")}},
			`{"ops":[["a",["content",0,"text"],"hi"]],"task":7,"type":"task_output"}`},
		{core.ConversationEvent{Type: core.EventInbox, Inbox: []core.InboxOp{{Type: "remove", ID: 9}}},
			`{"ops":[{"type":"remove","id":9}],"type":"inbox"}`},
		{core.ConversationEvent{Type: core.EventValue, Addr: "a", Value: json.RawMessage(`null`)}, `{"addr":"a","type":"value","value":null}`},
		{core.ConversationEvent{Type: core.EventValue, Addr: "a", Deleted: true}, `{"addr":"a","type":"value"}`},
		{core.ConversationEvent{Type: core.EventContext, IDs: []storage.ID{3, 5}, ReadAt: 6}, `{"ids":[3,5],"readAt":6,"type":"context"}`},
		{core.ConversationEvent{Type: core.EventFault, Error: "boom"}, `{"error":"boom","type":"fault"}`},
		{core.ConversationEvent{Type: core.EventClosed}, `{"type":"closed"}`},
	}
	for _, tc := range cases {
		got := string(must(json.Marshal(tc.event)))
		if got != tc.want {
			t.Errorf("%s: got %s; want %s", tc.event.Type, got, tc.want)
			continue
		}
		var back core.ConversationEvent
		must(0, json.Unmarshal([]byte(got), &back))
		if diff := cmp.Diff(tc.event, back, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s round trip (-want +got):\n%s", tc.event.Type, diff)
		}
	}
	var e core.ConversationEvent
	if err := json.Unmarshal([]byte(`{"type":"nope"}`), &e); err == nil {
		t.Error("an unknown event type decoded")
	}
}

// The session watch's usage totals are the fold of the usage rows it
// delivered — retried, failed and aborted attempts included — and its view
// equals a fresh capture, forks and reported hook errors among the events.
func TestSessionWatchUsageTotalsEqualTheFoldOfUsageRows(t *testing.T) {
	sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(faux.RateLimited(), answer("after a retry"), faux.Reply().WithError("boom"),
			answer(strings.Repeat("long ", 200)).WithDelay(time.Hour))
		sw := must(a.h.WatchSession(ctx))
		var events []core.SessionEvent
		sw.Start(ctx, func(e core.SessionEvent) { events = append(events, e) })
		a.h.Hooks().On(core.GenerationKind, core.HookAfterResponse, core.Hook(func(context.Context, core.AfterResponseInput) (any, error) {
			return nil, errors.New("metrics down")
		}), core.HookOptions{})
		c := a.h.Root()
		first := must(c.Prompt(ctx, userText("one"), core.AcceptOptions{}))
		must(c.Prompt(ctx, userText("two"), core.AcceptOptions{}))
		must(c.Fork(ctx, first.ID, core.ForkOptions{}))
		must(c.Accept(ctx, userText("three"), core.AcceptOptions{}))
		done := s.Runtime().NewEvent("turn")
		s.Runtime().Go(ctx, "driver", func(ctx context.Context) { must(c.Drive(ctx)); done.Set() })
		must(0, s.Runtime().Sleep(ctx, time.Duration(1000+s.Rand().IntN(500))*time.Millisecond))
		must(0, c.Abort(ctx))
		must(0, done.Wait(ctx))
		for i := 0; i < 10_000 && sw.View().ReadAt < a.h.Store().LastSeq(); i++ {
			must(0, s.Runtime().Sleep(ctx, 0))
		}
		var sum ai.Usage
		var outcomes []string
		reports, forks := 0, 0
		for _, e := range events {
			switch e.Type {
			case core.SessionEventUsage:
				outcomes = append(outcomes, e.Row.Outcome)
				if e.Row.Usage != nil {
					sum = sum.Add(*e.Row.Usage)
				}
				if *e.Totals != sum {
					t.Fatalf("totals after %s row = %+v; want the fold %+v", e.Row.Outcome, *e.Totals, sum)
				}
			case core.SessionEventReport:
				reports++
			case core.SessionEventConversation:
				forks++
			}
		}
		if diff := cmp.Diff([]string{"retry", "done", "failed", "aborted"}, outcomes); diff != "" {
			t.Fatalf("usage rows (-want +got):\n%s", diff)
		}
		if reports == 0 || forks != 1 {
			t.Fatalf("%d reports, %d conversation events; want the after_response failures and the fork", reports, forks)
		}
		fresh := must(a.h.WatchSession(ctx))
		if diff := cmp.Diff(fresh.View(), sw.View(), cmpopts.IgnoreFields(core.SessionView{}, "ReadAt")); diff != "" {
			t.Fatalf("session view (-capture +folded):\n%s", diff)
		}
		var totals ai.Usage
		must(0, json.Unmarshal(sw.View().Values[core.UsageTotals.String()], &totals))
		if totals != sum {
			t.Fatalf("view totals %+v; want %+v", totals, sum)
		}
		must(0, a.h.Close(ctx))
	})
}

// foldStep is one drawn action of the fold property: what to do and the
// choices it makes.
type foldStep struct {
	Op     int // 0-9, see TestFoldedViewEqualsAFreshCaptureAfterEveryCommit
	Pick   int // which earlier entry an edit targets
	Choice bool
}

// foldStepsPerRun is how many actions one drawn history takes.
const foldStepsPerRun = 30

// foldChecksMin is how many histories the property draws unless
// -rapid.checks asks for more.
const foldChecksMin = 200

// The fold is correct, as a rapid property under the simulated runtime:
// after every commit of a drawn history — entries, heads, edits, config and
// requested values, idle accepts creating work, queued input landing and
// cancelled, tasks created and marked, crashes with a reopen — the folded
// view equals a fresh capture. rapid draws the history and the simulator's
// seed, and shrinks a failing history.
func TestFoldedViewEqualsAFreshCaptureAfterEveryCommit(t *testing.T) {
	checks := foldChecksMin
	if f := flag.Lookup("rapid.checks"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > checks {
			checks = n
		}
	}
	for round := 0; round*100 < checks; round++ {
		rapid.Check(t, func(rt *rapid.T) {
			seed := rapid.Uint64Range(1, 1<<40).Draw(rt, "seed")
			plan := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) foldStep {
				return foldStep{Op: rapid.IntRange(0, 9).Draw(rt, "op"), Pick: rapid.IntRange(0, 1<<20).Draw(rt, "pick"), Choice: rapid.Bool().Draw(rt, "choice")}
			}), foldStepsPerRun, foldStepsPerRun).Draw(rt, "plan")
			if failure := foldHistory(t, seed, plan); failure != "" {
				rt.Fatalf("seed %d: %s", seed, failure)
			}
		})
	}
}

// foldHistory runs one drawn history and returns the first difference
// between the folded view and a fresh capture, or "".
func foldHistory(t *testing.T, seed uint64, plan []foldStep) (failure string) {
	s := sim.New(sim.Options{Seed: seed})
	err := s.Run(context.Background(), func(ctx context.Context) {
		planMode := storage.ConversationValue[bool]("plan.mode", storage.Rewind)
		store := reopenable{memory.New()}
		var h *core.Harness
		var c *core.Conversation
		var w *core.WatchHandle
		var r *watched
		openWatched := func() {
			h = open(t, ctx, s, store, jobKind)
			c = h.Root()
			w = must(h.Watch(ctx, c.ID, core.WatchOptions{Tail: 5, Values: []storage.Address{planMode.Address}}))
			r = &watched{w: w}
			w.Start(ctx, func(e core.ConversationEvent) { r.events = append(r.events, e) })
		}
		openWatched()
		var ids []storage.ID
		for step, p := range plan {
			switch p.Op {
			case 8:
				// An idle accept creates a generation nobody drives; later
				// input queues behind it.
				must(c.Accept(ctx, userText("go"), core.AcceptOptions{}))
			case 9:
				// A crash and a reopen: the new process's watch starts from
				// its own capture and folds on from there.
				closeCrashed(ctx, h)
				openWatched()
			case 0, 1:
				must(c.Commit(ctx, func(tx *core.ConversationTx) error {
					ids = append(ids, core.AppendUser(tx.Tx, c.ID, ai.UserText("m", 0)))
					return nil
				}))
			case 2:
				must(c.Commit(ctx, func(tx *core.ConversationTx) error { core.AppendReset(tx.Tx, c.ID); return nil }))
			case 3:
				if len(ids) > 0 {
					target := ids[p.Pick%len(ids)]
					_, _ = c.Commit(ctx, func(tx *core.ConversationTx) error { // a target outside the context may be refused
						tx.Entry(core.NoticeKind, core.EntryDraft{Edits: []storage.ContextEdit{{Target: target, Action: storage.EditOmit}}})
						return nil
					})
				}
			case 4:
				must(c.Commit(ctx, func(tx *core.ConversationTx) error {
					if p.Choice {
						tx.SetValue(planMode.Address, step%2 == 0)
					} else {
						tx.SetValue(core.ThinkingValue.Address, "high")
					}
					return nil
				}))
			case 5:
				id := must(c.NextRun(ctx, userText("later")))
				if p.Choice {
					must(c.CancelQueued(ctx, id))
				}
			case 6:
				task := createTask(t, ctx, c, jobKind, core.TaskSpec{State: map[string]int{"step": step}})
				if p.Choice {
					must(0, h.AbortTask(ctx, task))
				}
			case 7:
				must(c.Write(ctx, core.NoticeKind, core.EntryDraft{Data: map[string]int{"step": step}}))
			}
			caughtUp(ctx, s, h, r, h.Store().LastSeq())
			fresh := must(h.Watch(ctx, c.ID, core.WatchOptions{Tail: 5, Values: []storage.Address{planMode.Address}}))
			if diff := viewDiff(fresh.View(), w.View()); diff != "" {
				failure = fmt.Sprintf("view after step %d (op %d) (-capture +folded):\n%s", step, p.Op, diff)
				fresh.Unsubscribe()
				break
			}
			fresh.Unsubscribe()
		}
		must(0, h.Close(ctx))
	})
	if err != nil {
		return err.Error()
	}
	return failure
}

// A capture taken while a task is between a preview change and the scratch
// commit that flushes it holds what was flushed, not the change: the flush
// then brings the change exactly once.
func TestResnapshotMidStreamDoesNotDuplicatePreviewText(t *testing.T) {
	sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(answer(strings.Repeat("word ", 60)))
		c := a.h.Root()
		r := startWatch(t, ctx, a.h, c.ID, nil)
		done := s.Runtime().NewEvent("turn")
		must(c.Accept(ctx, userText("go"), core.AcceptOptions{}))
		s.Runtime().Go(ctx, "driver", func(ctx context.Context) { must(c.Drive(ctx)); done.Set() })
		for !done.IsSet() {
			must(r.w.Resnapshot(ctx))
			for range s.Rand().IntN(4) {
				must(0, s.Runtime().Sleep(ctx, 0))
			}
			// Caught up, the replica's previews are exactly the flushed ones
			// (checked only if nothing committed while the flushed preview
			// was read: reading it takes the line, which lets others run).
			seq := a.h.Store().LastSeq()
			if v := r.w.View(); v.ReadAt == seq {
				for id, p := range v.Previews {
					live, ok := must2(a.h.Preview(ctx, id))
					if !ok || a.h.Store().LastSeq() != seq {
						continue
					}
					if diff := cmp.Diff(live, p); diff != "" {
						t.Fatalf("preview of task %d (-flushed +replica):\n%s", id, diff)
					}
				}
			}
		}
		caughtUp(ctx, s, a.h, r, a.h.Store().LastSeq())
		fresh := must(a.h.Watch(ctx, c.ID, core.WatchOptions{Tail: 1000}))
		viewsEqual(t, "view after resnapshots mid-stream", fresh.View(), r.w.View())
		fresh.Unsubscribe()
		must(0, a.h.Close(ctx))
	})
}
