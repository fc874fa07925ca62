package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// goroutineID is the running goroutine's number, from its stack's header
// line ("goroutine 42 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	return strings.Fields(string(buf[:runtime.Stack(buf, false)]))[1]
}

// relay is a kind whose execute is body.
func relay(body func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error) core.KindFuncs {
	return core.KindFuncs{
		Statuses:    core.Statuses{Name: "relay", Initial: "planned", Roles: simtest.TaskRoles},
		ExecuteFunc: body,
	}
}

// settleMakingNext settles task, in a commit that makes the next task of
// a chain of k (with left-1 left) when left is not 0.
func settleMakingNext(ctx context.Context, rt *core.TaskRuntime, k core.KindFuncs, task *storage.Task, left int) error {
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		if left > 0 {
			tx.Task(k, core.TaskSpec{State: left - 1})
		}
		tx.Settle(task.ID, "done", nil)
		return nil
	})
	return err
}

// openReal opens a harness under the real runtime with kind k.
func openReal(t *testing.T, k core.TaskKind, observe func(core.Invocation, bool)) *core.Harness {
	t.Helper()
	h, err := core.Open(context.Background(), memory.New(), core.Options{
		Runtime: core.RealRuntime(), TaskKinds: []core.TaskKind{k}, CheckInvariants: true, OnInvocation: observe,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

// Under the real runtime a settlement hands its task's successor to the
// settling invocation's goroutine: the successor starts once the settler
// has completed, on that goroutine, and a chain of tasks runs on one.
func TestARealSettlementHandsTheTaskItMadeRunnableToItsGoroutine(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	ran := map[storage.ID]string{}
	var seen []string
	var k core.KindFuncs
	k = relay(func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
		mu.Lock()
		ran[task.ID] = goroutineID()
		mu.Unlock()
		var left int
		if err := json.Unmarshal(task.State, &left); err != nil {
			return err
		}
		return settleMakingNext(ctx, rt, k, task, left)
	})
	h := openReal(t, k, func(inv core.Invocation, returned bool) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%d %v", inv.Task, returned))
	})
	c := h.Root()
	var first storage.ID
	must(c.Commit(ctx, func(tx *core.ConversationTx) error { first = tx.Task(k, core.TaskSpec{State: 2}); return nil }))
	must(c.Drive(ctx))
	must(0, h.Close(ctx)) // waits for the last invocation to return

	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 3 {
		t.Fatalf("ran %d tasks (%v); want the chain of 3", len(ran), ran)
	}
	var want []string
	for _, id := range slices.Sorted(maps.Keys(ran)) {
		if g := ran[id]; g != ran[first] {
			t.Errorf("task %d ran on goroutine %s, task %d on %s; want one goroutine for the chain", id, g, first, ran[first])
		}
		want = append(want, fmt.Sprintf("%d false", id), fmt.Sprintf("%d true", id))
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("invocations (-want +got): each should start after the one before returned\n%s", diff)
	}
}

// A commit that does not settle the task starts what it made runnable at
// once: here the task waits, outside its runtime, for the one it created.
func TestARealCommitThatDoesNotSettleStartsWhatItMadeRunnable(t *testing.T) {
	ctx := context.Background()
	started := make(chan struct{})
	var k core.KindFuncs
	k = relay(func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
		var child bool
		if err := json.Unmarshal(task.State, &child); err != nil {
			return err
		}
		if child {
			close(started)
		} else {
			if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Task(k, core.TaskSpec{State: true})
				tx.Patch(task.ID, core.TaskPatch{Status: "running"})
				return nil
			}); err != nil {
				return err
			}
			<-started
		}
		_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "done", nil); return nil })
		return err
	})
	h := openReal(t, k, nil)
	c := h.Root()
	must(c.Commit(ctx, func(tx *core.ConversationTx) error { tx.Task(k, core.TaskSpec{State: false}); return nil }))
	must(c.Drive(ctx))
}

// A settler that calls on its runtime again before returning starts what it
// held back first: here it waits for the task its settlement created.
func TestARealSettlerThatWaitsAfterSettlingStartsWhatItHeldBack(t *testing.T) {
	ctx := context.Background()
	var waited []bool // written by the settler, read once the harness is closed
	var k core.KindFuncs
	k = relay(func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
		var child bool
		if err := json.Unmarshal(task.State, &child); err != nil {
			return err
		}
		var next storage.ID
		if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
			if !child {
				next = tx.Task(k, core.TaskSpec{State: true})
			}
			tx.Settle(task.ID, "done", nil)
			return nil
		}); err != nil || child {
			return err
		}
		ok, err := rt.WaitForTask(ctx, next, 0)
		waited = append(waited, ok)
		return err
	})
	h := openReal(t, k, nil)
	c := h.Root()
	must(c.Commit(ctx, func(tx *core.ConversationTx) error { tx.Task(k, core.TaskSpec{State: false}); return nil }))
	must(c.Drive(ctx))
	must(0, h.Close(ctx)) // waits for the settler to return
	if len(waited) != 1 || !waited[0] {
		t.Fatalf("the settler's wait for its successor = %v; want [true]", waited)
	}
}

// A task that was handed on starts what its own commits make runnable as
// any task does, also through a handle rather than its runtime: nothing of
// the settlement that handed it on stays with it.
func TestARealHandedOnTaskStartsWhatItsHandleCommitsMakeRunnable(t *testing.T) {
	ctx := context.Background()
	started := make(chan struct{})
	var k core.KindFuncs
	k = relay(func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
		var step int
		if err := json.Unmarshal(task.State, &step); err != nil {
			return err
		}
		switch step {
		case 0: // settles, handing on step 1
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Task(k, core.TaskSpec{State: 1})
				tx.Settle(task.ID, "done", nil)
				return nil
			})
			return err
		case 1: // creates step 2 through a handle, and waits for it outside its runtime
			c, err := rt.Conversation(ctx, task.ConversationID)
			if err != nil {
				return err
			}
			if _, err := c.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Task(k, core.TaskSpec{State: 2})
				tx.Patch(task.ID, core.TaskPatch{Status: "running"})
				return nil
			}); err != nil {
				return err
			}
			<-started
		default:
			close(started)
		}
		_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "done", nil); return nil })
		return err
	})
	h := openReal(t, k, nil)
	c := h.Root()
	must(c.Commit(ctx, func(tx *core.ConversationTx) error { tx.Task(k, core.TaskSpec{State: 0}); return nil }))
	must(c.Drive(ctx))
}

type hostValueKey struct{}

type linkValueKey struct{}

// An invocation's ctx carries the values of the host's ctx that began its
// chain of tasks, never those of the invocation that made it runnable: a
// long chain neither deepens every lookup nor keeps the contexts of the
// tasks before it alive.
func TestAChainOfTasksCarriesTheHostsValuesNotItsMakers(t *testing.T) {
	const links = 200
	var mu sync.Mutex
	var wrong []string
	var k core.KindFuncs
	k = relay(func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
		var left int
		if err := json.Unmarshal(task.State, &left); err != nil {
			return err
		}
		mu.Lock()
		if v := ctx.Value(hostValueKey{}); v != "the host's" {
			wrong = append(wrong, fmt.Sprintf("task %d: the host's value is %v", task.ID, v))
		}
		if v := ctx.Value(linkValueKey{}); v != nil {
			wrong = append(wrong, fmt.Sprintf("task %d: sees %v", task.ID, v))
		}
		mu.Unlock()
		// What this invocation adds to its ctx stays its own.
		ctx = context.WithValue(ctx, linkValueKey{}, fmt.Sprintf("the value of task %d", task.ID))
		return settleMakingNext(ctx, rt, k, task, left)
	})
	h := openReal(t, k, nil)
	ctx := context.WithValue(context.Background(), hostValueKey{}, "the host's")
	c := h.Root()
	must(c.Commit(ctx, func(tx *core.ConversationTx) error { tx.Task(k, core.TaskSpec{State: links - 1}); return nil }))
	must(c.Drive(ctx))
	must(0, h.Close(ctx))
	mu.Lock()
	defer mu.Unlock()
	if len(wrong) > 0 {
		t.Fatalf("%d of %d links saw the wrong values, first: %s", len(wrong), links, wrong[0])
	}
}
