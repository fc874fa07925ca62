package agent_test

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
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
	"pgregory.net/rapid"
)

// The fold is correct: after a session of turns with tools, steering, a
// queued write, a reset, an abort and a cancel, the view folded from the
// events equals a fresh capture, and so does a thin client's fold of the
// JSON event stream with no kinds registered.
func TestFoldedViewEqualsAFreshCaptureAndAThinClientFold(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(calls("a", "b"), answer("first").WithDelay(time.Second), answer("second"), answer("never").WithDelay(time.Hour))
		c := a.h.Root()
		r := simtest.StartWatch(t, ctx, a.h, c.ID, nil)
		done := s.Runtime().NewEvent("turn")
		must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		s.Runtime().Go(ctx, "driver", func(ctx context.Context) { must(c.Drive(ctx)); done.Set() })
		must(c.Steer(ctx, userText("steer")))
		mustWrite(c.Write(ctx, core.NoticeKind, core.EntryDraft{Data: map[string]string{"note": "n"}}))
		q := must(c.FollowUp(ctx, userText("later")))
		if s.Rand().IntN(2) == 0 {
			must(c.CancelQueued(ctx, q))
		}
		must(0, done.Wait(ctx))
		must(c.Commit(ctx, func(tx *core.ConversationTx) error { core.AppendReset(tx.Tx, c.ID); return nil }))
		must(c.Accept(ctx, userText("stuck"), agent.AcceptOptions{}))
		done2 := s.Runtime().NewEvent("turn2")
		s.Runtime().Go(ctx, "driver2", func(ctx context.Context) { must(c.Drive(ctx)); done2.Set() })
		must(0, s.Runtime().Sleep(ctx, time.Duration(s.Rand().IntN(3000))*time.Millisecond))
		must(0, c.Abort(ctx))
		must(0, done2.Wait(ctx))

		simtest.CaughtUp(ctx, s, r, a.h.Store().LastSeq())
		fresh := must(a.h.Watch(ctx, c.ID, core.WatchOptions{Tail: 1000}))
		simtest.ViewsEqual(t, "folded view", fresh.View(), r.W.View())
		fresh.Unsubscribe()

		// A thin client: the base and the events as JSON, folded with no
		// harness at all.
		var thin core.ConversationView
		must(0, json.Unmarshal(r.Base, &thin))
		for _, e := range r.Events {
			var decoded core.ConversationEvent
			must(0, json.Unmarshal(must(json.Marshal(e)), &decoded))
			must(0, core.ApplyEvent(&thin, decoded))
		}
		simtest.ViewsEqual(t, "thin client's view", fresh.View(), &thin)
		for i := 1; i < len(r.Events); i++ {
			if r.Events[i].ReadAt < r.Events[i-1].ReadAt {
				t.Fatalf("event %d (commit %d) delivered after commit %d: events must arrive in commit order", i, r.Events[i].ReadAt, r.Events[i-1].ReadAt)
			}
		}
		must(0, a.h.Close(ctx))
	})
}

func TestIdleAcceptEmitsNoInboxEventWhileQueuedInputDoes(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(answer("one").WithDelay(time.Second), answer("two"))
		c := a.h.Root()
		r := simtest.StartWatch(t, ctx, a.h, c.ID, nil)
		must(c.Accept(ctx, userText("idle"), agent.AcceptOptions{}))
		done := s.Runtime().NewEvent("turn")
		s.Runtime().Go(ctx, "driver", func(ctx context.Context) { must(c.Drive(ctx)); done.Set() })
		busy := must(c.Accept(ctx, userText("busy"), agent.AcceptOptions{}))
		must(0, done.Wait(ctx))
		simtest.CaughtUp(ctx, s, r, a.h.Store().LastSeq())
		var ops []core.InboxOp
		for _, e := range r.Events {
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

// Regression (an earlier prototype dropped late deltas): events committed
// between the capture and Start, and task outputs flushed after a task's
// start event, all reach the view.
func TestEventsBetweenCaptureAndStartAreDelivered(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(answer("streamed answer with several words in it"))
		c := a.h.Root()
		w := must(a.h.Watch(ctx, c.ID, core.WatchOptions{Tail: 100}))
		must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{}))
		r := &simtest.Watched{W: w}
		w.Start(ctx, func(e core.ConversationEvent) { r.Events = append(r.Events, e) })
		simtest.CaughtUp(ctx, s, r, a.h.Store().LastSeq())
		if simtest.CountType(r.Events, core.EventTaskOutput) == 0 {
			t.Fatal("no task_output delivered: the stream's deltas were dropped")
		}
		fresh := must(a.h.Watch(ctx, c.ID, core.WatchOptions{Tail: 100}))
		simtest.ViewsEqual(t, "view folded after a late start", fresh.View(), w.View())
		must(0, a.h.Close(ctx))
	})
}

// The session watch's usage totals are the fold of the usage rows it
// delivered — retried, failed and aborted attempts included — and its view
// equals a fresh capture, forks and reported hook errors among the events.
func TestSessionWatchUsageTotalsEqualTheFoldOfUsageRows(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(faux.RateLimited(), answer("after a retry"), faux.Reply().WithError("boom"),
			answer(strings.Repeat("long ", 200)).WithDelay(time.Hour))
		sw := must(a.h.WatchSession(ctx))
		var events []core.SessionEvent
		sw.Start(ctx, func(e core.SessionEvent) { events = append(events, e) })
		a.h.Hooks().On(agent.GenerationKind, agent.HookAfterResponse, core.Hook(func(context.Context, agent.AfterResponseInput) (any, error) {
			return nil, errors.New("metrics down")
		}), core.HookOptions{})
		c := a.h.Root()
		first := must(c.Prompt(ctx, userText("one"), agent.AcceptOptions{}))
		var ie *agent.InputError
		if _, err := c.Prompt(ctx, userText("two"), agent.AcceptOptions{}); !errors.As(err, &ie) {
			t.Fatalf("the failing turn = %v; want an InputError", err)
		}
		must(c.Fork(ctx, first.ID, core.ForkOptions{}))
		must(c.Accept(ctx, userText("three"), agent.AcceptOptions{}))
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
				row, totals, err := agent.UsageOf(e)
				must(0, err)
				outcomes = append(outcomes, row.Outcome)
				if row.Usage != nil {
					sum = sum.Add(*row.Usage)
				}
				if totals != sum {
					t.Fatalf("totals after %s row = %+v; want the fold %+v", row.Outcome, totals, sum)
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
		must(0, json.Unmarshal(sw.View().Values[agent.UsageTotals.String()], &totals))
		if totals != sum {
			t.Fatalf("view totals %+v; want %+v", totals, sum)
		}
		must(0, a.h.Close(ctx))
	})
}

// parkedKind is a plugin kind the fold property creates tasks of and never
// drives: they stay planned, or marked.
var parkedKind = core.KindFuncs{Statuses: core.Statuses{Name: "test_job", Initial: "planned", Roles: simtest.TaskRoles}}

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
		store := simtest.Reopenable{Store: memory.New()}
		var h *agent.Harness
		var c *agent.Conversation
		var w *core.WatchHandle
		var r *simtest.Watched
		openWatched := func() {
			h = must(agent.Open(ctx, store, agent.Options{Runtime: s.Runtime(), TaskKinds: []core.TaskKind{parkedKind}, CheckInvariants: true}))
			c = h.Root()
			w = must(h.Watch(ctx, c.ID, core.WatchOptions{Tail: 5, Values: []storage.Address{planMode.Address}}))
			r = &simtest.Watched{W: w}
			w.Start(ctx, func(e core.ConversationEvent) { r.Events = append(r.Events, e) })
		}
		openWatched()
		var ids []storage.ID
		for step, p := range plan {
			switch p.Op {
			case 8:
				// An idle accept creates a generation nobody drives; later
				// input queues behind it.
				must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
			case 9:
				// A crash and a reopen: the new process's watch starts from
				// its own capture and folds on from there.
				simtest.CloseCrashed(ctx, h)
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
						tx.SetValue(agent.ThinkingValue.Address, "high")
					}
					return nil
				}))
			case 5:
				id := must(c.NextRun(ctx, userText("later")))
				if p.Choice {
					must(c.CancelQueued(ctx, id))
				}
			case 6:
				task := simtest.CreateTask(t, ctx, c, parkedKind, core.TaskSpec{State: map[string]int{"step": step}})
				if p.Choice {
					must(0, h.AbortTask(ctx, task))
				}
			case 7:
				mustWrite(c.Write(ctx, core.NoticeKind, core.EntryDraft{Data: map[string]int{"step": step}}))
			}
			simtest.CaughtUp(ctx, s, r, h.Store().LastSeq())
			fresh := must(h.Watch(ctx, c.ID, core.WatchOptions{Tail: 5, Values: []storage.Address{planMode.Address}}))
			if diff := simtest.ViewDiff(fresh.View(), w.View()); diff != "" {
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

// streamWatched runs one streamed answer of the root conversation, watched
// from before it starts or, when late, from some steps into it; step runs
// between the checks. Whenever the replica is caught up its previews must
// be exactly the flushed ones (checked only if nothing committed while the
// flushed preview was read: reading it takes the line, which lets others
// run); at the end its view must be a fresh capture's.
func streamWatched(t testing.TB, ctx context.Context, s *sim.Sim, what string, late bool, step func(r *simtest.Watched)) {
	a := openAgent(t, ctx, s, agentOptions{})
	a.faux.SetResponses(answer(strings.Repeat("word ", 60)))
	c := a.h.Root()
	var r *simtest.Watched
	if !late {
		r = simtest.StartWatch(t, ctx, a.h, c.ID, nil)
	}
	done := s.Runtime().NewEvent("turn")
	must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
	s.Runtime().Go(ctx, "driver", func(ctx context.Context) { must(c.Drive(ctx)); done.Set() })
	if late {
		for range s.Rand().IntN(40) {
			must(0, s.Runtime().Sleep(ctx, 0))
		}
		r = simtest.StartWatch(t, ctx, a.h, c.ID, nil)
	}
	for !done.IsSet() {
		step(r)
		seq := a.h.Store().LastSeq()
		if v := r.W.View(); v.ReadAt == seq {
			for id, p := range v.Previews {
				live, ok := must2(a.h.Preview(ctx, id))
				if !ok || a.h.Store().LastSeq() != seq {
					continue
				}
				if diff := cmp.Diff(live, p); diff != "" {
					t.Fatalf("%s: preview of task %d (-flushed +replica):\n%s", what, id, diff)
				}
			}
		}
	}
	simtest.CaughtUp(ctx, s, r, a.h.Store().LastSeq())
	fresh := must(a.h.Watch(ctx, c.ID, core.WatchOptions{Tail: 1000}))
	simtest.ViewsEqual(t, what, fresh.View(), r.W.View())
	fresh.Unsubscribe()
	must(0, a.h.Close(ctx))
}

// A capture taken while a task is between a preview change and the scratch
// commit that flushes it holds what was flushed, not the change: the flush
// then brings the change exactly once.
func TestResnapshotMidStreamDoesNotDuplicatePreviewText(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		streamWatched(t, ctx, s, "view after resnapshots mid-stream", false,
			func(r *simtest.Watched) {
				must(r.W.Resnapshot(ctx))
				for range s.Rand().IntN(4) {
					must(0, s.Runtime().Sleep(ctx, 0))
				}
			})
	})
}

// A generation that streams while nothing watches leaves its preview alone
// (PreviewWatched); a watch that attaches mid-stream captures the partial
// answer rebuilt from the frames in scratch, and from then on its replica
// follows the flushed preview exactly and folds to a fresh capture.
func TestAWatchAttachedMidStreamFollowsThePreview(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		streamWatched(t, ctx, s, "view of a watch attached mid-stream", true,
			func(*simtest.Watched) { must(0, s.Runtime().Sleep(ctx, 0)) })
	})
}
