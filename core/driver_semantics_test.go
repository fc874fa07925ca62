package core_test

// The driver's scheduling rules (reference §6.1–6.3): status epochs, one
// invocation per task id, concurrency across ids, whole-batch settlement,
// dependencies, attachments and waiters, and recovery on reopen. Every test
// runs under the simulated runtime across the seed sweep.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// invocationLog records the invocations a test's kinds receive: how many per task
// and method, how many run at once, and any task that ever had two at once.
// Exactly one actor runs at a time in the simulation, so plain maps suffice.
type invocationLog struct {
	n          map[storage.ID]map[core.Method]int
	active     map[storage.ID]int
	overlap    []storage.ID
	running    int
	runningMax int
}

func newInvocationLog() *invocationLog {
	return &invocationLog{n: map[storage.ID]map[core.Method]int{}, active: map[storage.ID]int{}}
}

// enter counts one invocation and returns its exit.
func (c *invocationLog) enter(rt *core.TaskRuntime) (exit func()) {
	id := rt.TaskID()
	if c.n[id] == nil {
		c.n[id] = map[core.Method]int{}
	}
	c.n[id][rt.Method()]++
	if c.active[id]++; c.active[id] > 1 {
		c.overlap = append(c.overlap, id)
	}
	c.running++
	c.runningMax = max(c.runningMax, c.running)
	return func() { c.active[id]--; c.running-- }
}

func (c *invocationLog) count(id storage.ID, m core.Method) int { return c.n[id][m] }

type kindMethod = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error

// probeKind is stepKind (planned → running → body → done; recover settles
// failed; abort settles aborted) with execute replaced when execute is not
// nil, and every method counted in c.
func probeKind(name string, c *invocationLog, execute kindMethod) core.KindFuncs {
	k := simtest.StepKind(name, nil)
	if execute != nil {
		k.ExecuteFunc = execute
	}
	k.ExecuteFunc = counted(c, k.ExecuteFunc)
	k.RecoverFunc = counted(c, k.RecoverFunc)
	k.AbortFunc = counted(c, k.AbortFunc)
	return k
}

func counted(c *invocationLog, m kindMethod) kindMethod {
	return func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
		defer c.enter(rt)()
		return m(ctx, task, rt)
	}
}

func patchTask(ctx context.Context, rt *core.TaskRuntime, id storage.ID, p core.TaskPatch) error {
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Patch(id, p); return nil })
	return err
}

func settleTask(ctx context.Context, rt *core.TaskRuntime, id storage.ID, status string, st any) error {
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(id, status, st); return nil })
	return err
}

// attemptOf is the "attempt" field of a task's state (0 when absent).
func attemptOf(task *storage.Task) int {
	var s struct{ Attempt int }
	_ = json.Unmarshal(task.State, &s)
	return s.Attempt
}

// wantContractFault checks that err is the session fault of task id's method and
// that its cause mentions because.
func wantContractFault(t testing.TB, err error, id storage.ID, kind string, m core.Method, because string) {
	t.Helper()
	var fe *core.FaultError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v; want a *core.FaultError", err)
	}
	if fe.Task != id || fe.Kind != kind || fe.Method != string(m) || fe.Err == nil || !strings.Contains(fe.Err.Error(), because) {
		t.Fatalf("fault = %v; want task %d (%s) %s failing with %q", fe, id, kind, m, because)
	}
}

// --- status epochs ---

func TestStatusCycleAcrossCommitsIsATransitionAndRunsAgain(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		c := newInvocationLog()
		kind := probeKind("cycle", c, func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if err := patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
				return err
			}
			if attemptOf(task) == 0 { // back to the starting status, one commit later
				return patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "planned", State: map[string]int{"attempt": 1}})
			}
			return settleTask(ctx, rt, task.ID, "done", nil)
		})
		h := open(t, ctx, s, nil, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		if got, err := h.Root().Drive(ctx); err != nil || got != core.Idle {
			t.Fatalf("drive = %s, %v; want idle, no fault", got, err)
		}
		if got, n := simtest.Status(t, ctx, h, id), c.count(id, core.MethodExecute); got != "done" || n != 2 {
			t.Fatalf("status %s after %d executes; want done after 2 (planned again means startable again)", got, n)
		}
		must(0, h.Close(ctx))
	})
}

func TestStatusCycleWithinOneBatchIsATransition(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		c := newInvocationLog()
		kind := probeKind("cycle", c, func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if attemptOf(task) == 0 {
				// Two patches in one commit; the batch ends where the task began.
				_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
					tx.Patch(task.ID, core.TaskPatch{Status: "running"})
					tx.Patch(task.ID, core.TaskPatch{Status: "planned", State: map[string]int{"attempt": 1}})
					return nil
				})
				return err
			}
			return settleTask(ctx, rt, task.ID, "done", nil)
		})
		h := open(t, ctx, s, nil, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		if got, err := h.Root().Drive(ctx); err != nil || got != core.Idle {
			t.Fatalf("drive = %s, %v; want idle, no fault", got, err)
		}
		if got, n := simtest.Status(t, ctx, h, id), c.count(id, core.MethodExecute); got != "done" || n != 2 {
			t.Fatalf("status %s after %d executes; want done after 2", got, n)
		}
		must(0, h.Close(ctx))
	})
}

func TestRecoverMayReturnToStartAndTheTaskExecutesAgain(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		c := newInvocationLog()
		kind := probeKind("resumable", c, func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if attemptOf(task) == 0 {
				// Intent committed, then return: the task is inflight, so recover runs.
				return patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "running", State: map[string]int{"attempt": 1}})
			}
			return settleTask(ctx, rt, task.ID, "done", nil)
		})
		kind.RecoverFunc = counted(c, func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			return patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "planned"})
		})
		h := open(t, ctx, s, nil, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		if got, err := h.Root().Drive(ctx); err != nil || got != core.Idle {
			t.Fatalf("drive = %s, %v; want idle, no fault", got, err)
		}
		if got := simtest.Status(t, ctx, h, id); got != "done" || c.count(id, core.MethodExecute) != 2 || c.count(id, core.MethodRecover) != 1 {
			t.Fatalf("status %s, calls %v; want done after execute, recover, execute", got, c.n[id])
		}
		must(0, h.Close(ctx))
	})
}

// Every way of returning normally without a committed status change of
// one's own faults the session, names the task and method, and manufactures
// no outcome.
func TestReturningWithoutAnEpochAdvanceFaults(t *testing.T) {
	errGaveUp := errors.New("plan gave up")
	cases := []struct {
		name string
		// execute, recover and abort of the kind; nil keeps stepKind's.
		execute, recover, abort kindMethod
		markFirst               bool        // abort-mark the task before driving
		executesMax             int         // executes the rules allow (0: one)
		method                  core.Method // the faulting method
		because                 string
		status                  string // the task's status after the fault
	}{
		{
			name: "same-status patch",
			execute: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
				return patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "planned"})
			},
			method: core.MethodExecute, because: "transition", status: "planned",
		},
		{
			name: "state-only patch",
			execute: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
				return patchTask(ctx, rt, task.ID, core.TaskPatch{State: map[string]string{"note": "busy"}})
			},
			method: core.MethodExecute, because: "transition", status: "planned",
		},
		{
			name: "plan that failed after a status patch",
			execute: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
				_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
					tx.Patch(task.ID, core.TaskPatch{Status: "running"})
					return errGaveUp
				})
				if !errors.Is(err, errGaveUp) {
					return errors.New("the failed plan did not report its error")
				}
				return nil
			},
			method: core.MethodExecute, because: "transition", status: "planned",
		},
		{
			name: "batch rejected after a status patch",
			execute: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
				_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
					tx.Patch(task.ID, core.TaskPatch{Status: "running"})
					tx.Patch(task.ID, core.TaskPatch{Status: "sleeping"})
					return nil
				})
				if core.RuleOf(err) != core.RuleUnknownStatus {
					return errors.New("the bad batch was not rejected")
				}
				return nil
			},
			method: core.MethodExecute, because: "transition", status: "planned",
		},
		{
			name: "transition made by an earlier invocation",
			execute: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
				if attemptOf(task) == 0 {
					_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
						tx.Patch(task.ID, core.TaskPatch{Status: "running"})
						tx.Patch(task.ID, core.TaskPatch{Status: "planned", State: map[string]int{"attempt": 1}})
						return nil
					})
					return err
				}
				return nil // the second execute changes nothing itself
			},
			executesMax: 2,
			method:      core.MethodExecute, because: "transition", status: "planned",
		},
		{
			name: "recover without a transition",
			execute: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
				return patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "running"})
			},
			recover: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
				return patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "running", State: map[string]bool{"checked": true}})
			},
			method: core.MethodRecover, because: "transition", status: "running",
		},
		{
			name:      "abort that changes status but does not settle",
			markFirst: true,
			abort: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
				return patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "running"})
			},
			method: core.MethodAbort, because: "settl", status: "running",
		},
		{
			name:      "abort that returns at once",
			markFirst: true,
			abort:     func(context.Context, *storage.Task, *core.TaskRuntime) error { return nil },
			method:    core.MethodAbort, because: "settl", status: "planned",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
				c := newInvocationLog()
				kind, plain := simtest.StepKind("lazy", nil), simtest.StepKind("lazy", nil)
				// Each method runs as often as the rules allow and fails
				// loudly beyond that, so that a wrongly advanced epoch ends
				// the run at once instead of looping.
				executesMax := max(tc.executesMax, 1)
				kind.ExecuteFunc = counted(c, limited(c, executesMax, orDefault(tc.execute, plain.ExecuteFunc)))
				kind.RecoverFunc = counted(c, limited(c, 1, orDefault(tc.recover, plain.RecoverFunc)))
				kind.AbortFunc = counted(c, limited(c, 1, orDefault(tc.abort, plain.AbortFunc)))
				durable := memory.New() // outlives the faulted harness, which closes its handle
				h := open(t, ctx, s, fault.Wrap(s.Runtime(), durable, fault.Plan{}, nil), kind)
				id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
				if tc.markFirst {
					must(0, h.AbortTask(ctx, id))
				}
				_, err := h.Root().Drive(ctx)
				wantContractFault(t, err, id, "lazy", tc.method, tc.because)
				if got := must(durable.GetTasks(ctx, []storage.ID{id}))[id].Status; got != tc.status {
					t.Fatalf("status after the fault = %s; want %s (no outcome is manufactured)", got, tc.status)
				}
				if _, err := h.Commit(ctx, func(*core.Tx) error { return nil }); !errors.As(err, new(*core.FaultError)) {
					t.Fatalf("commit after the fault = %v; want the fault", err)
				}
			})
		})
	}
}

// limited fails an invocation beyond the n-th of its method for its task.
func limited(c *invocationLog, n int, m kindMethod) kindMethod {
	return func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
		if got := c.count(task.ID, rt.Method()); got > n {
			return fmt.Errorf("%s invoked %d times; at most %d expected", rt.Method(), got, n)
		}
		return m(ctx, task, rt)
	}
}

// orDefault returns m, or fallback when m is nil.
func orDefault(m, fallback kindMethod) kindMethod {
	if m != nil {
		return m
	}
	return fallback
}

// --- invocations ---

// A task that returns to its start status is startable again, but its next
// execute waits until the previous one has returned; a marked task's abort
// waits for an execute that ignores its signal.
func TestOneInvocationPerTaskID(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		c := newInvocationLog()
		cycler := probeKind("cycler", c, func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			if err := patchTask(ctx, trt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
				return err
			}
			if attemptOf(task) == 2 {
				return settleTask(ctx, trt, task.ID, "done", nil)
			}
			if err := patchTask(ctx, trt, task.ID, core.TaskPatch{Status: "planned", State: map[string]int{"attempt": attemptOf(task) + 1}}); err != nil {
				return err
			}
			// Startable again already; linger before returning.
			for range 3 {
				rt.Sleep(ctx, 0)
			}
			return rt.Sleep(ctx, time.Millisecond)
		})
		started := rt.NewEvent("stubborn-started")
		stubborn := probeKind("stubborn", c, func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			if err := patchTask(ctx, trt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
				return err
			}
			started.Set()
			rt.Sleep(context.WithoutCancel(ctx), time.Second) // ignores its signal for a while
			return settleTask(ctx, trt, task.ID, "done", nil)
		})
		h := open(t, ctx, s, nil, cycler, stubborn)
		root := h.Root()
		var cycling []storage.ID
		for range 3 {
			cycling = append(cycling, simtest.CreateTask(t, ctx, root, cycler, core.TaskSpec{}))
		}
		marked := simtest.CreateTask(t, ctx, root, stubborn, core.TaskSpec{})
		done := simtest.DriveInActor(ctx, s, root, func(r core.DriveResult, err error) {
			if r != core.Idle || err != nil {
				t.Errorf("drive = %s, %v; want idle", r, err)
			}
		})
		started.Wait(ctx)
		must(0, h.AbortTask(ctx, marked))
		done.Wait(ctx)
		if len(c.overlap) > 0 {
			t.Fatalf("tasks %v had two invocations at once", c.overlap)
		}
		for _, id := range cycling {
			if got, n := simtest.Status(t, ctx, h, id), c.count(id, core.MethodExecute); got != "done" || n != 3 {
				t.Fatalf("task %d: %s after %d executes; want done after 3", id, got, n)
			}
		}
		if got := simtest.Status(t, ctx, h, marked); got != "aborted" || c.count(marked, core.MethodAbort) != 1 {
			t.Fatalf("marked task: %s, calls %v; want aborted by one abort", got, c.n[marked])
		}
		must(0, h.Close(ctx))
	})
}

// The slot is held until the method returns, even after the task settled:
// close joins an invocation whose task is already terminal.
func TestSettledInvocationKeepsItsSlotUntilItReturns(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		returned := false
		kind := simtest.StepKind("linger", nil)
		kind.ExecuteFunc = func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			if err := settleTask(ctx, trt, task.ID, "done", nil); err != nil {
				return err
			}
			rt.Sleep(context.WithoutCancel(ctx), time.Hour)
			returned = true
			return nil
		}
		h := open(t, ctx, s, nil, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		must(h.Root().Drive(ctx))
		if got := simtest.Status(t, ctx, h, id); got != "done" || returned {
			t.Fatalf("after the drive: status %s, returned %v; want done and still running", got, returned)
		}
		must(0, h.Close(ctx))
		if !returned {
			t.Fatal("close returned before the settled task's invocation did")
		}
	})
}

func TestDifferentTasksRunConcurrentlyAndABlockedOneBlocksNoOther(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		c := newInvocationLog()
		up := map[string]core.Event{"a": rt.NewEvent("a-up"), "b": rt.NewEvent("b-up")}
		// a and b each wait for the other to be running: neither finishes
		// unless both run at once.
		pair := func(self, other string) kindMethod {
			return func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
				if err := patchTask(ctx, trt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
					return err
				}
				up[self].Set()
				if err := up[other].Wait(ctx); err != nil {
					return err
				}
				return settleTask(ctx, trt, task.ID, "done", nil)
			}
		}
		a, b := probeKind("a", c, pair("a", "b")), probeKind("b", c, pair("b", "a"))
		stuck := probeKind("stuck", c, func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			if err := patchTask(ctx, trt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
				return err
			}
			return rt.NewEvent("never").Wait(ctx) // until close signals it
		})
		h := open(t, ctx, s, nil, a, b, stuck)
		root := h.Root()
		blocked := simtest.CreateTask(t, ctx, root, stuck, core.TaskSpec{Background: true})
		ida := simtest.CreateTask(t, ctx, root, a, core.TaskSpec{})
		idb := simtest.CreateTask(t, ctx, root, b, core.TaskSpec{})
		if got := must(root.Drive(ctx)); got != core.Idle {
			t.Fatalf("drive = %s; want idle", got)
		}
		if simtest.Status(t, ctx, h, ida) != "done" || simtest.Status(t, ctx, h, idb) != "done" || c.runningMax < 2 {
			t.Fatalf("a %s, b %s, at most %d at once; want both done, at least 2 at once",
				simtest.Status(t, ctx, h, ida), simtest.Status(t, ctx, h, idb), c.runningMax)
		}
		if got := simtest.Status(t, ctx, h, blocked); got == "done" {
			t.Fatalf("the blocked task is %s", got)
		}
		must(0, h.Close(ctx))
	})
}

// --- idle and whole batches ---

// A task that settles and creates its successor in one commit never lets a
// drive see an idle moment between them, whether or not the successor is
// after the settled task.
func TestSettleWithSuccessorExposesNoIdleGap(t *testing.T) {
	const chainLen = 5
	cases := []struct {
		name                   string
		dependent, settleFirst bool
	}{
		{"independent successor created before the settle", false, false},
		{"independent successor created after the settle", false, true},
		{"successor after the settled task, created before the settle", true, false},
		{"successor after the settled task, created after the settle", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
				rt := s.Runtime()
				var kind core.KindFuncs
				kind = simtest.StepKind("link", nil)
				kind.ExecuteFunc = func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
					if err := patchTask(ctx, trt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
						return err
					}
					rt.Sleep(ctx, time.Millisecond) // drive waiters get every chance to look
					_, err := trt.Commit(ctx, func(tx *core.ConversationTx) error {
						if tc.settleFirst {
							tx.Settle(task.ID, "done", nil)
						}
						if n := attemptOf(task); n < chainLen-1 {
							spec := core.TaskSpec{State: map[string]int{"attempt": n + 1}}
							if tc.dependent {
								spec.After = []storage.ID{task.ID}
							}
							tx.Task(kind, spec)
						}
						if !tc.settleFirst {
							tx.Settle(task.ID, "done", nil)
						}
						return nil
					})
					return err
				}
				h := open(t, ctx, s, nil, kind)
				root := h.Root()
				// Idle may only be seen once the whole chain is terminal.
				checkChain := func(who string) func(core.DriveResult, error) {
					return func(r core.DriveResult, err error) {
						if r != core.Idle || err != nil {
							t.Errorf("%s drive = %s, %v; want idle", who, r, err)
							return
						}
						p := must(h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: 100}}))
						for _, task := range p.Items {
							if task.Live() {
								t.Errorf("%s drive resolved idle while task %d (link %d) is %s", who, task.ID, attemptOf(task), task.Status)
							}
						}
						if len(p.Items) != chainLen {
							t.Errorf("%s drive resolved idle after %d links; want %d", who, len(p.Items), chainLen)
						}
					}
				}
				simtest.CreateTask(t, ctx, root, kind, core.TaskSpec{})
				waits := []core.Event{
					simtest.DriveInActor(ctx, s, root, checkChain("first conversation")),
					simtest.DriveInActor(ctx, s, root, checkChain("conversation")),
					simtest.DriveInActor(ctx, s, h, checkChain("session")),
				}
				for _, w := range waits {
					w.Wait(ctx)
				}
				must(0, h.Close(ctx))
			})
		})
	}
}

// --- dependencies ---

// A dependent starts only once its dependency is terminal, whatever the
// terminal status.
func TestDependentStartsOnlyWhenItsDependencyIsTerminal(t *testing.T) {
	for _, outcome := range []string{"done", "failed", "aborted"} {
		t.Run(outcome, func(t *testing.T) {
			simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
				rt := s.Runtime()
				c := newInvocationLog()
				up, release := rt.NewEvent("first-up"), rt.NewEvent("release-first")
				first := probeKind("first", c, func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
					if err := patchTask(ctx, trt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
						return err
					}
					up.Set()
					if err := release.Wait(ctx); err != nil {
						return err // signalled by the abort mark
					}
					return settleTask(ctx, trt, task.ID, outcome, nil)
				})
				var sawFirst string
				var firstID storage.ID
				second := probeKind("second", c, func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
					dep, _, err := trt.GetTask(ctx, firstID)
					if err != nil {
						return err
					}
					sawFirst = dep.Status
					return settleTask(ctx, trt, task.ID, "done", nil)
				})
				h := open(t, ctx, s, nil, first, second)
				var secondID storage.ID
				must(h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
					firstID = tx.Task(first, core.TaskSpec{})
					secondID = tx.Task(second, core.TaskSpec{After: []storage.ID{firstID}})
					return nil
				}))
				done := simtest.DriveInActor(ctx, s, h.Root(), nil)
				up.Wait(ctx)
				rt.Sleep(ctx, time.Second)
				if n := c.count(secondID, core.MethodExecute); n != 0 {
					t.Fatalf("the dependent ran %d times while its dependency was live", n)
				}
				if outcome == "aborted" {
					must(0, h.AbortTask(ctx, firstID))
				} else {
					release.Set()
				}
				done.Wait(ctx)
				if sawFirst != outcome || simtest.Status(t, ctx, h, secondID) != "done" || c.count(secondID, core.MethodExecute) != 1 {
					t.Fatalf("the dependent saw its dependency %q, ended %s after %d executes; want %q, done, 1",
						sawFirst, simtest.Status(t, ctx, h, secondID), c.count(secondID, core.MethodExecute), outcome)
				}
				must(0, h.Close(ctx))
			})
		})
	}
}

func TestMarkedTaskAbortsRegardlessOfDependencies(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		c := newInvocationLog()
		up, release := rt.NewEvent("first-up"), rt.NewEvent("release-first")
		first := probeKind("first", c, func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			if err := patchTask(ctx, trt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
				return err
			}
			up.Set()
			if err := release.Wait(ctx); err != nil {
				return err
			}
			return settleTask(ctx, trt, task.ID, "done", nil)
		})
		var firstID storage.ID
		var firstAtAbort string
		aborted := rt.NewEvent("second-aborted")
		second := probeKind("second", c, nil)
		second.AbortFunc = counted(c, func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			dep, _, err := trt.GetTask(ctx, firstID)
			if err != nil {
				return err
			}
			firstAtAbort = dep.Status
			err = settleTask(ctx, trt, task.ID, "aborted", nil)
			aborted.Set()
			return err
		})
		h := open(t, ctx, s, nil, first, second)
		var secondID storage.ID
		must(h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			firstID = tx.Task(first, core.TaskSpec{})
			secondID = tx.Task(second, core.TaskSpec{After: []storage.ID{firstID}})
			return nil
		}))
		done := simtest.DriveInActor(ctx, s, h.Root(), nil)
		up.Wait(ctx)
		must(0, h.AbortTask(ctx, secondID))
		aborted.Wait(ctx)
		if firstAtAbort != "running" || c.count(secondID, core.MethodExecute) != 0 {
			t.Fatalf("abort ran with its dependency %q after %d executes; want running and 0", firstAtAbort, c.count(secondID, core.MethodExecute))
		}
		release.Set()
		done.Wait(ctx)
		if simtest.Status(t, ctx, h, firstID) != "done" || simtest.Status(t, ctx, h, secondID) != "aborted" {
			t.Fatalf("first %s, second %s; want done and aborted", simtest.Status(t, ctx, h, firstID), simtest.Status(t, ctx, h, secondID))
		}
		must(0, h.Close(ctx))
	})
}

// --- attachments and waiters ---

// Foreground idle resolves while background work goes on; the attachment
// the drive made stays after its waiter resolved, so the background task
// finishes and new work starts without another drive.
func TestForegroundIdleWhileAttachedBackgroundWorkContinues(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		release, bgDone, lateDone := rt.NewEvent("release-background"), rt.NewEvent("background-done"), rt.NewEvent("late-done")
		background := simtest.StepKind("background", func(ctx context.Context, _ *storage.Task, _ *core.TaskRuntime) error {
			return release.Wait(ctx)
		})
		background.ExecuteFunc = signalAfter(background.ExecuteFunc, bgDone)
		fg := simtest.StepKind("foreground", nil)
		late := simtest.StepKind("late", nil)
		late.ExecuteFunc = signalAfter(late.ExecuteFunc, lateDone)
		lingering := simtest.StepKind("lingering", func(ctx context.Context, _ *storage.Task, _ *core.TaskRuntime) error {
			return rt.NewEvent("never").Wait(ctx) // until close signals it
		})
		h := open(t, ctx, s, nil, background, fg, late, lingering)
		root := h.Root()
		bg := simtest.CreateTask(t, ctx, root, background, core.TaskSpec{Background: true})
		f := simtest.CreateTask(t, ctx, root, fg, core.TaskSpec{})
		if got := must(root.Drive(ctx)); got != core.Idle {
			t.Fatalf("conversation drive = %s; want idle", got)
		}
		if simtest.Status(t, ctx, h, f) != "done" || simtest.Status(t, ctx, h, bg) == "done" {
			t.Fatalf("foreground %s, background %s at idle; want done and still live", simtest.Status(t, ctx, h, f), simtest.Status(t, ctx, h, bg))
		}
		release.Set()
		bgDone.Wait(ctx) // nobody drives now
		if got := simtest.Status(t, ctx, h, bg); got != "done" {
			t.Fatalf("background = %s; want done", got)
		}
		id := simtest.CreateTask(t, ctx, root, late, core.TaskSpec{})
		lateDone.Wait(ctx) // served by the attachment the drive made
		if got := simtest.Status(t, ctx, h, id); got != "done" {
			t.Fatalf("task created after the drive = %s; want done", got)
		}
		// Session idle ignores background work too.
		bg2 := simtest.CreateTask(t, ctx, root, lingering, core.TaskSpec{Background: true})
		if got := must(h.Drive(ctx)); got != core.Idle || simtest.Status(t, ctx, h, bg2) == "done" {
			t.Fatalf("session drive = %s with the background task %s; want idle while it is live", got, simtest.Status(t, ctx, h, bg2))
		}
		must(0, h.Close(ctx))
	})
}

// signalAfter runs m, then sets ev.
func signalAfter(m kindMethod, ev core.Event) kindMethod {
	return func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
		defer ev.Set()
		return m(ctx, task, rt)
	}
}

// Cancelling a drive removes only its waiter: the attachment stays and the
// work finishes.
func TestCancelledDriveKeepsItsAttachment(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		up, release, quickDone := rt.NewEvent("up"), rt.NewEvent("release"), rt.NewEvent("quick-done")
		slow := simtest.StepKind("slow", func(ctx context.Context, _ *storage.Task, _ *core.TaskRuntime) error {
			up.Set()
			return release.Wait(ctx)
		})
		quick := simtest.StepKind("quick", nil)
		quick.ExecuteFunc = signalAfter(quick.ExecuteFunc, quickDone)
		h := open(t, ctx, s, nil, slow, quick)
		id := simtest.CreateTask(t, ctx, h.Root(), slow, core.TaskSpec{})
		dctx, cancel := context.WithCancel(ctx)
		done := simtest.DriveInActor(dctx, s, h.Root(), func(r core.DriveResult, err error) {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled drive = %s, %v; want context.Canceled", r, err)
			}
		})
		up.Wait(ctx)
		cancel()
		done.Wait(ctx)
		// Work created after the cancellation is still served, and the
		// running task is still running.
		next := simtest.CreateTask(t, ctx, h.Root(), quick, core.TaskSpec{})
		quickDone.Wait(ctx)
		if simtest.Status(t, ctx, h, next) != "done" || simtest.Status(t, ctx, h, id) != "running" {
			t.Fatalf("after the cancelled drive: new task %s, running task %s; want done, running", simtest.Status(t, ctx, h, next), simtest.Status(t, ctx, h, id))
		}
		release.Set()
		if got := must(h.Root().Drive(ctx)); got != core.Idle || simtest.Status(t, ctx, h, id) != "done" {
			t.Fatalf("drive = %s, task %s; want idle, done", got, simtest.Status(t, ctx, h, id))
		}
		must(0, h.Close(ctx))
	})
}

// Driving the same scope repeatedly, concurrently or not, attaches it once:
// every task runs exactly once.
func TestRepeatedDriveUsesOneAttachment(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		c := newInvocationLog()
		kind := probeKind("once", c, func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			if err := patchTask(ctx, trt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
				return err
			}
			rt.Sleep(ctx, time.Millisecond)
			return settleTask(ctx, trt, task.ID, "done", nil)
		})
		h := open(t, ctx, s, nil, kind)
		root := h.Root()
		var ids []storage.ID
		for range 3 {
			ids = append(ids, simtest.CreateTask(t, ctx, root, kind, core.TaskSpec{}))
		}
		idle := func(r core.DriveResult, err error) {
			if r != core.Idle || err != nil {
				t.Errorf("drive = %s, %v; want idle", r, err)
			}
		}
		a, b := simtest.DriveInActor(ctx, s, root, idle), simtest.DriveInActor(ctx, s, root, idle)
		idle(root.Drive(ctx))
		a.Wait(ctx)
		b.Wait(ctx)
		idle(root.Drive(ctx))
		idle(h.Drive(ctx))
		for _, id := range ids {
			if got := c.count(id, core.MethodExecute); got != 1 || simtest.Status(t, ctx, h, id) != "done" {
				t.Fatalf("task %d ran %d times and is %s; want once, done", id, got, simtest.Status(t, ctx, h, id))
			}
		}
		if len(c.overlap) > 0 {
			t.Fatalf("tasks %v had two invocations at once", c.overlap)
		}
		must(0, h.Close(ctx))
	})
}

// --- reopen ---

// crashableStore is a memory store wrapped so that a harness can be "crashed"
// and a new one opened over the same durable state.
func crashableStore(s *sim.Sim) *fault.Storage {
	return fault.Wrap(s.Runtime(), memory.New(), fault.Plan{}, nil)
}

// A harness that stops with work in every state leaves it to the next one:
// inflight work recovers, marked work aborts (inflight or not), startable
// work executes — each exactly once, by one drive after reopen.
func TestReopenRecoversMarkedAndInflightWork(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		first, second := newInvocationLog(), newInvocationLog()
		inflightUp, stubbornUp := rt.NewEvent("inflight-up"), rt.NewEvent("stubborn-up")
		kinds := func(c *invocationLog) []core.TaskKind {
			inflight := probeKind("inflight", c, func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
				if err := patchTask(ctx, trt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
					return err
				}
				inflightUp.Set()
				return rt.NewEvent("never").Wait(ctx)
			})
			stubborn := probeKind("stubborn", c, func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
				if err := patchTask(ctx, trt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
					return err
				}
				stubbornUp.Set()
				rt.Sleep(context.WithoutCancel(ctx), time.Hour) // the mark lands meanwhile
				return core.ErrTaskCancelled
			})
			return []core.TaskKind{inflight, stubborn, probeKind("plain", c, nil)}
		}
		store := crashableStore(s)
		h1 := open(t, ctx, s, store, kinds(first)...)
		k := h1.Kinds()
		kindNamed := func(name string) core.TaskKind { kk, _ := k.Task(name); return kk }
		root := h1.Root()
		var inflight, stubborn, startable, marked storage.ID
		must(root.Commit(ctx, func(tx *core.ConversationTx) error {
			inflight = tx.Task(kindNamed("inflight"), core.TaskSpec{})
			stubborn = tx.Task(kindNamed("stubborn"), core.TaskSpec{})
			// An independent conversation nobody drives in the first process.
			other := tx.CreateConversation(core.ConversationSpec{})
			startable = tx.Tx.Task(kindNamed("plain"), core.TaskSpec{ConversationID: other})
			marked = tx.Tx.Task(kindNamed("plain"), core.TaskSpec{ConversationID: other})
			return nil
		}))
		driving := simtest.DriveInActor(ctx, s, root, nil)
		inflightUp.Wait(ctx)
		stubbornUp.Wait(ctx)
		must(0, h1.AbortTask(ctx, stubborn))
		must(0, h1.AbortTask(ctx, marked))

		// Crash: the process's handle dies with everything still live.
		h2 := open(t, ctx, s, store.Reopen(fault.Plan{}), kinds(second)...)
		in := must(h2.Inspect(ctx))
		if got := idsOf(in.Inflight); !sameIDs(got, inflight, stubborn) {
			t.Fatalf("inspect inflight = %v; want %v", got, []storage.ID{inflight, stubborn})
		}
		if got := idsOf(in.Start); !sameIDs(got, startable, marked) {
			t.Fatalf("inspect start = %v; want %v", got, []storage.ID{startable, marked})
		}
		if got := must(h2.Drive(ctx)); got != core.Idle {
			t.Fatalf("drive after reopen = %s; want idle", got)
		}
		want := map[storage.ID]struct {
			m      core.Method
			status string
		}{
			inflight:  {core.MethodRecover, "failed"},
			stubborn:  {core.MethodAbort, "aborted"},
			startable: {core.MethodExecute, "done"},
			marked:    {core.MethodAbort, "aborted"},
		}
		for id, w := range want {
			if got := simtest.Status(t, ctx, h2, id); got != w.status || len(second.n[id]) != 1 || second.count(id, w.m) != 1 {
				t.Fatalf("task %d after reopen: %s, calls %v; want %s after one %s", id, got, second.n[id], w.status, w.m)
			}
		}
		if first.count(marked, core.MethodAbort)+first.count(startable, core.MethodExecute) != 0 {
			t.Fatalf("the first process ran work it was not driving: %v %v", first.n[marked], first.n[startable])
		}
		must(0, h2.Close(ctx))
		simtest.CloseCrashed(ctx, h1) // the dead process unwinds its invocations
		driving.Wait(ctx)
	})
}

func idsOf(ts []*storage.Task) []storage.ID {
	out := make([]storage.ID, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func sameIDs(got []storage.ID, want ...storage.ID) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// A conversation attachment serves every owned descendant, even when the
// owner settled in an earlier process and the link was never loaded since.
func TestReopenedAttachmentServesNewWorkInASettledOwnersChild(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		var child storage.ID
		spawner := simtest.StepKind("spawner", nil)
		spawner.ExecuteFunc = func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			_, err := trt.Commit(ctx, func(tx *core.ConversationTx) error {
				child = tx.CreateConversation(core.ConversationSpec{Owner: task.ID})
				tx.Settle(task.ID, "done", nil)
				return nil
			})
			return err
		}
		finished := rt.NewEvent("child-task-done")
		plain := simtest.StepKind("plain", nil)
		plain.ExecuteFunc = signalAfter(plain.ExecuteFunc, finished)
		store := crashableStore(s)
		h1 := open(t, ctx, s, store, spawner, plain)
		simtest.CreateTask(t, ctx, h1.Root(), spawner, core.TaskSpec{})
		must(h1.Root().Drive(ctx))
		must(0, h1.Close(ctx))

		h2 := open(t, ctx, s, store.Reopen(fault.Plan{}), spawner, plain)
		must(h2.Root().Drive(ctx)) // attaches the root; nothing is live
		c := must(h2.Conversation(ctx, child))
		id := simtest.CreateTask(t, ctx, c, plain, core.TaskSpec{})
		finished.Wait(ctx) // a deadlock here: the root's attachment does not serve its child
		if got := simtest.Status(t, ctx, h2, id); got != "done" {
			t.Fatalf("task in the owned child = %s; want done", got)
		}
		must(0, h2.Close(ctx))
	})
}

// Abort of a conversation reaches, through a live foreground owner, work
// created after reopen in a child whose link was not loaded at open.
func TestAbortAfterReopenReachesNewWorkInALiveOwnersChild(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		var child, grandTask storage.ID
		up, recovering := rt.NewEvent("owner-up"), rt.NewEvent("owner-recovering")
		plain := simtest.StepKind("plain", func(ctx context.Context, _ *storage.Task, _ *core.TaskRuntime) error {
			return rt.NewEvent("never").Wait(ctx)
		})
		owner := simtest.StepKind("owner", nil)
		owner.ExecuteFunc = func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			if _, err := trt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Patch(task.ID, core.TaskPatch{Status: "running"})
				child = tx.CreateConversation(core.ConversationSpec{Owner: task.ID})
				return nil
			}); err != nil {
				return err
			}
			up.Set()
			return rt.NewEvent("never").Wait(ctx)
		}
		owner.RecoverFunc = func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			c, err := trt.Conversation(ctx, child)
			if err != nil {
				return err
			}
			if _, err := c.Commit(ctx, func(tx *core.ConversationTx) error {
				grandTask = tx.Task(plain, core.TaskSpec{})
				return nil
			}); err != nil {
				return err
			}
			recovering.Set()
			return rt.NewEvent("never").Wait(ctx)
		}
		store := crashableStore(s)
		h1 := open(t, ctx, s, store, owner, plain)
		simtest.CreateTask(t, ctx, h1.Root(), owner, core.TaskSpec{})
		driving := simtest.DriveInActor(ctx, s, h1.Root(), nil)
		up.Wait(ctx)

		h2 := open(t, ctx, s, store.Reopen(fault.Plan{}), owner, plain)
		done := simtest.DriveInActor(ctx, s, h2.Root(), nil)
		recovering.Wait(ctx)
		must(0, h2.Root().Abort(ctx))
		task, _, err := h2.GetTask(ctx, grandTask)
		if err != nil || !task.Abort {
			t.Fatalf("the child's task after the root's abort: %+v, %v; want it marked (its owner is a live foreground task)", task, err)
		}
		done.Wait(ctx)
		must(0, h2.Close(ctx))
		simtest.CloseCrashed(ctx, h1)
		driving.Wait(ctx)
	})
}

// --- invariants inside invocations ---

// forgingStore returns a forged state for task forge once armed: what a
// store that lost or garbled a commit would answer.
type forgingStore struct {
	storage.Storage
	forge storage.ID
	armed bool
}

func (f *forgingStore) GetTasks(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Task, error) {
	m, err := f.Storage.GetTasks(ctx, ids)
	if t := m[f.forge]; f.armed && t != nil {
		c := *t
		c.State = json.RawMessage(`{"forged":true}`)
		m[f.forge] = &c
	}
	return m, err
}

// The invariant check runs in the actor that commits, here an invocation,
// whose recover makes a kind's panic a failed task: a broken invariant of
// the harness goes through it and stops the run, naming the invariant,
// rather than become the task's failure. The check compares the driver's
// record of every live task with storage's (Tx reads live tasks from the
// record).
func TestABrokenInvariantInAnInvocationIsNotTheKindsFailure(t *testing.T) {
	s := sim.New(sim.Options{Seed: 1})
	store := &forgingStore{Storage: memory.New()}
	err := s.Run(context.Background(), func(ctx context.Context) {
		kind := simtest.StepKind("forged", func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			store.forge, store.armed = task.ID, true
			return patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "running"})
		})
		h := open(t, ctx, s, store, kind)
		simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		_, _ = h.Root().Drive(ctx)
	})
	if err == nil || !strings.Contains(err.Error(), `driver invariant "live-records" broken`) {
		t.Fatalf("run = %v; want the simulator stopped by the live-records invariant", err)
	}
}

// The same holds for a hook's recover: a hook that commits and breaks an
// invariant stops the run, rather than become the hook's error.
func TestABrokenInvariantInAHookIsNotTheHooksError(t *testing.T) {
	s := sim.New(sim.Options{Seed: 1})
	store := &forgingStore{Storage: memory.New()}
	err := s.Run(context.Background(), func(ctx context.Context) {
		var kind core.KindFuncs
		kind = simtest.StepKind("hooked", func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			outs, err := rt.RunHooks(ctx, kind, "point", nil)
			if err == nil && len(outs) == 1 && outs[0].Err != nil {
				t.Errorf("the hook's broken invariant became its error: %v", outs[0].Err)
			}
			return err
		})
		h := open(t, ctx, s, store, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		h.Hooks().On(kind, "point", func(ctx context.Context, _ any) (any, error) {
			store.forge, store.armed = id, true
			_, err := h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
				tx.SetValue(storage.SessionValue[int]("tick").Address, 1)
				return nil
			})
			return nil, err
		}, core.HookOptions{})
		_, _ = h.Root().Drive(ctx)
	})
	if err == nil || !strings.Contains(err.Error(), `driver invariant "live-records" broken`) {
		t.Fatalf("run = %v; want the simulator stopped by the live-records invariant", err)
	}
}

// --- ownership ---

// An invocation changes only its own task (§6.1): its commits that patch
// another task's status or state, or settle it, reject with RuleNotOwner
// and write nothing; an abort mark of another task is allowed. Task 2's
// execute tries each on task 3, which then runs and ends as its own
// invocation has it, aborted by the mark.
func TestAnInvocationChangesOnlyItsOwnTask(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		c := newInvocationLog()
		attempts := map[string]error{}
		var written storage.ID
		var h *core.Harness
		var other storage.ID
		kind := probeKind("owner", c, func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if task.ID != 2 {
				return settleTask(ctx, rt, task.ID, "done", nil)
			}
			before := h.Store().LastSeq()
			attempts["status"] = patchTask(ctx, rt, other, core.TaskPatch{Status: "running"})
			attempts["state"] = patchTask(ctx, rt, other, core.TaskPatch{State: map[string]bool{"meddled": true}})
			attempts["settle"] = settleTask(ctx, rt, other, "done", nil)
			written = h.Store().LastSeq() - before
			attempts["mark"] = patchTask(ctx, rt, other, core.TaskPatch{Abort: true})
			return settleTask(ctx, rt, task.ID, "done", nil)
		})
		h = open(t, ctx, s, nil, kind)
		ids := make([]storage.ID, 2)
		if _, err := h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			ids[0] = tx.Task(kind, core.TaskSpec{})
			ids[1] = tx.Task(kind, core.TaskSpec{After: []storage.ID{ids[0]}})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		other = ids[1]
		if ids[0] != 2 {
			t.Fatalf("the first task is %d; the kind expects 2", ids[0])
		}
		if got, err := h.Root().Drive(ctx); err != nil || got != core.Idle {
			t.Fatalf("drive = %s, %v; want idle, no fault", got, err)
		}
		for _, name := range []string{"status", "state", "settle"} {
			if core.RuleOf(attempts[name]) != core.RuleNotOwner {
				t.Fatalf("task 2's %s change of task %d = %v; want rule %s", name, other, attempts[name], core.RuleNotOwner)
			}
		}
		if written != 0 || attempts["mark"] != nil {
			t.Fatalf("the refused changes wrote %d ids and the mark = %v; want none and the mark allowed", written, attempts["mark"])
		}
		if got := simtest.Status(t, ctx, h, other); got != "aborted" {
			t.Fatalf("task %d ended %s; want aborted, by its own abort after the mark", other, got)
		}
	})
}
