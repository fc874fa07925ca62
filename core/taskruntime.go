package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pico-go/pico/storage"
)

// TaskRuntime is what one invocation gets from the driver (§5.2). It is
// bound to that invocation: every call checks that its ctx carries the same
// identity, so a stale or foreign ctx is rejected rather than silently
// acting with someone else's authority.
type TaskRuntime struct {
	h   *Harness
	inv *invocation
}

// TaskID is the task this runtime serves.
func (r *TaskRuntime) TaskID() storage.ID { return r.inv.task }

// ConversationID is the task's conversation.
func (r *TaskRuntime) ConversationID() storage.ID { return r.inv.conv }

// Method is the kind method this invocation runs.
func (r *TaskRuntime) Method() Method { return r.inv.method }

// Invocation identifies the task method a ctx belongs to.
type Invocation struct {
	Task           storage.ID
	ConversationID storage.ID
	Method         Method
}

// InvocationOf reports the task invocation ctx carries, if any: how a verb
// that a task may call tells a host call from a task's (an abort handler,
// for one, may not queue new work).
func InvocationOf(ctx context.Context) (Invocation, bool) {
	inv := invocationOf(ctx)
	if inv == nil {
		return Invocation{}, false
	}
	return Invocation{Task: inv.task, ConversationID: inv.conv, Method: inv.method}, true
}

// check refuses a ctx that does not carry this invocation. A call on the
// runtime is also where the invocations it held back start (handon.go): it
// may be about to wait for them.
func (r *TaskRuntime) check(ctx context.Context) error {
	if inv := invocationOf(ctx); inv != r.inv {
		return fmt.Errorf("%w: the ctx does not carry task %d's invocation", ErrStaleInvocation, r.inv.task)
	}
	r.h.d.startHeld(r.inv)
	return nil
}

// Commit commits a plan with the task's conversation bound. After a durable
// abort mark it rejects with ErrTaskCancelled before the builder runs. A
// commit that settles the task holds back what it makes runnable until the
// invocation completes (handon.go).
func (r *TaskRuntime) Commit(ctx context.Context, plan func(tx *ConversationTx) error) (storage.Range, error) {
	if err := r.check(ctx); err != nil {
		return storage.Range{}, err
	}
	var held *heldStarts
	rg, err := r.h.commit(ctx, func(tx *Tx) error {
		if err := plan(&ConversationTx{Tx: tx, ID: r.inv.conv}); err != nil {
			return err
		}
		if tx.settles(r.inv.task) {
			held = r.h.d.newHeld()
			tx.held = held
		}
		return nil
	})
	r.inv.hold(held)
	return rg, err
}

// Scratch commits a plan to the task's own scratch (§4.6).
func (r *TaskRuntime) Scratch(ctx context.Context, plan func(sc ScratchTx) error) (storage.Range, error) {
	if err := r.check(ctx); err != nil {
		return storage.Range{}, err
	}
	return r.h.scratch(ctx, r.inv.task, plan)
}

// Now is the runtime's clock, not the wall clock. It has no ctx to check,
// so a runtime used after its method returned panics instead: a stale
// runtime is a bug of the kind that kept it.
func (r *TaskRuntime) Now() time.Time {
	if r.inv.returned.Load() {
		panic(fmt.Sprintf("core: TaskRuntime.Now of task %d's %s, which has returned: a stale runtime", r.inv.task, r.inv.method))
	}
	return r.h.rt.Now()
}

// Sleep sleeps until until, observing ctx.
func (r *TaskRuntime) Sleep(ctx context.Context, until time.Time) error {
	if err := r.check(ctx); err != nil {
		return err
	}
	d := until.Sub(r.h.rt.Now())
	return r.h.rt.Sleep(ctx, d)
}

// Harness is the session the task runs in: its kinds, its store for reads,
// and its Extensions, where a package of kinds keeps its configuration.
func (r *TaskRuntime) Harness() *Harness { return r.h }

// Report hands err to the harness's reporting path (Options.Report and
// every session watch's report event) without failing anything: how a kind
// reports a hook handler's failure it chose to skip. A *HookError or
// *FaultError names its task, kind and point in the report event.
func (r *TaskRuntime) Report(err error) { r.h.report(err) }

// Conversation returns a handle; calls through it forward the task's ctx.
func (r *TaskRuntime) Conversation(ctx context.Context, id storage.ID) (*Conversation, error) {
	if err := r.check(ctx); err != nil {
		return nil, err
	}
	return r.h.Conversation(ctx, id)
}

// AbortTask marks another task for cancellation.
func (r *TaskRuntime) AbortTask(ctx context.Context, id storage.ID) error {
	if err := r.check(ctx); err != nil {
		return err
	}
	return r.h.AbortTask(ctx, id)
}

// GetTask reads a task; like every TaskRuntime call, only with the
// invocation's own ctx.
func (r *TaskRuntime) GetTask(ctx context.Context, id storage.ID) (*storage.Task, bool, error) {
	if err := r.check(ctx); err != nil {
		return nil, false, err
	}
	return r.h.GetTask(ctx, id)
}

// GetTasks reads tasks by id.
func (r *TaskRuntime) GetTasks(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Task, error) {
	if err := r.check(ctx); err != nil {
		return nil, err
	}
	return r.h.GetTasks(ctx, ids)
}

// GetEntry reads an entry.
func (r *TaskRuntime) GetEntry(ctx context.Context, id storage.ID) (*storage.Entry, bool, error) {
	if err := r.check(ctx); err != nil {
		return nil, false, err
	}
	return r.h.GetEntry(ctx, id)
}

// RunHooks runs the handlers of kind's point for the task's conversation.
func (r *TaskRuntime) RunHooks(ctx context.Context, kind storage.Kinder, point string, input any) ([]HookOutcome, error) {
	if err := r.check(ctx); err != nil {
		return nil, err
	}
	return r.h.RunHooks(ctx, kind, point, r.inv.conv, input)
}

// WaitForTask waits until task id is terminal (true), or until budget runs
// out (false; 0 means no budget). It rejects a wait for the task itself or
// for a task whose unresolved dependencies lead back to it. Cancelling ctx
// removes the wait.
func (r *TaskRuntime) WaitForTask(ctx context.Context, id storage.ID, budget time.Duration) (bool, error) {
	if err := r.check(ctx); err != nil {
		return false, err
	}
	h, self := r.h, r.inv.task
	w := &waiter{target: id, by: self, ev: h.rt.NewEvent(fmt.Sprintf("task:%d", id))}
	err := h.line.Do(ctx, func() (func(), error) { return nil, h.d.waitForTask(ctx, self, id, w) })
	if err != nil {
		return false, err
	}
	waitCtx := ctx
	if budget > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithCancel(ctx)
		defer cancel()
		timedOut := h.rt.NewEvent("budget")
		h.rt.Go(ctx, fmt.Sprintf("task%d.budget", self), func(context.Context) {
			if h.rt.Sleep(waitCtx, budget) == nil {
				timedOut.Set()
				cancel()
			}
		})
		_, err := h.await(waitCtx, w)
		if err != nil && timedOut.IsSet() && ctx.Err() == nil {
			return false, nil
		}
		return err == nil, err
	}
	_, err = h.await(waitCtx, w)
	return err == nil, err
}

// Progress is the harness-owned path from an effect's callbacks (process
// output, stream events) into the task's scratch (§6.3). Each Write is one
// synchronous scratch commit, so there is never an unowned pending write.
// Once the invocation lost its authority (an abort mark, close, a stale
// identity) writes are dropped quietly: output that arrives after the
// cutoff is expected and cannot recreate retired scratch. Any other failure
// is kept and reported by Drain, which the driver also calls before the
// invocation's completion is admitted. Like every TaskRuntime call, a
// Progress is used from the invocation's own actor (ExecutionEnv delivers
// output on the calling actor), so it needs no locking.
type Progress struct {
	rt      *TaskRuntime
	ctx     context.Context
	err     error
	dropped int
	drained bool
}

// Progress returns a progress bridge bound to this invocation.
func (r *TaskRuntime) Progress(ctx context.Context) (*Progress, error) {
	if err := r.check(ctx); err != nil {
		return nil, err
	}
	p := &Progress{rt: r, ctx: ctx}
	r.inv.progress = append(r.inv.progress, p)
	return p, nil
}

// Write commits plan to the task's scratch, or drops it after the cutoff.
// It reports whether the write is durable: a producer that sees false
// should cancel its effect and join it before the method returns.
func (p *Progress) Write(plan func(sc ScratchTx) error) bool {
	if p.drained || p.err != nil {
		p.dropped++
		return false
	}
	_, err := p.rt.Scratch(p.ctx, plan)
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrTaskCancelled), errors.Is(err, ErrClosed), errors.Is(err, ErrStaleInvocation):
		p.dropped++
	default:
		p.err = err
	}
	return false
}

// Dropped is how many writes were dropped after the cutoff.
func (p *Progress) Dropped() int { return p.dropped }

// Drain ends the bridge: later writes are dropped, and the first real
// failure, if any, is returned.
func (p *Progress) Drain() error {
	p.drained = true
	return p.err
}
