package core

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Line is the commit line: every mutation of a session goes through it, one
// plan at a time. A plan builds a batch with a Tx (minting final ids as it
// goes), the line validates the whole batch, persists it, runs the
// after-commit step (index updates, decisions) and only then releases; what
// the decisions want done (start invocations, signal, wake waiters) runs
// after the release. Plans that fail, break a rule or panic write nothing and
// consume no ids.
type Line struct {
	store  storage.Storage
	kinds  *Kinds
	lock   Lock
	opts   LineOptions
	tracer trace.Tracer
	rt     Runtime
	// holder is who runs a plan or decision on the line right now, so that
	// a call from inside it is refused instead of waiting for itself.
	holder atomic.Pointer[lineHolder]
	// harness is the session the line serves, nil for a bare line: a Tx
	// reaches the cached contexts and the driver's busy counts through it.
	harness *Harness
	// spare is the transaction the last plan built, kept for the next one
	// (the line runs one plan at a time, and a plan never keeps its Tx):
	// its write buffer and its maps are emptied rather than made again. A
	// batch gets a copy of just its writes, where growing each plan's own
	// slice by doubling cost twice that.
	spare *Tx
}

// lineWritesMax bounds the write buffer, and the number of records a map,
// of the transaction a line keeps between plans.
const lineWritesMax = 64

// tx returns a transaction to build a plan with, the spare one if the line
// kept one.
func (l *Line) tx(ctx context.Context) *Tx {
	tx := l.spare
	if tx == nil {
		return newTx(ctx, l.store, l.kinds)
	}
	l.spare = nil
	*tx = Tx{
		ctx: ctx, store: l.store, kinds: l.kinds, base: l.store.LastSeq(), writes: tx.writes,
		tasks: tx.tasks, taskAt: tx.taskAt, convs: tx.convs, entries: tx.entries,
	}
	return tx
}

// keep empties tx for the next plan and keeps it, unless it grew large.
// What its writes and maps pointed to is the batch's now, or nobody's.
func (l *Line) keep(tx *Tx) {
	clear(tx.writes)
	if cap(tx.writes) > lineWritesMax {
		return
	}
	tx.writes = tx.writes[:0]
	tx.tasks, tx.taskAt = emptied(tx.tasks), emptied(tx.taskAt)
	tx.convs, tx.entries = emptied(tx.convs), emptied(tx.entries)
	tx.ctx, tx.h, tx.err, tx.traces, tx.held = nil, nil, nil, nil, nil
	l.spare = tx
}

// emptied returns m cleared, or nil if it held more than lineWritesMax
// records.
func emptied[K comparable, V any](m map[K]V) map[K]V {
	if len(m) > lineWritesMax {
		return nil
	}
	clear(m)
	return m
}

// LineOptions configures a line. Every hook runs on the line.
type LineOptions struct {
	// Admit runs before a plan: an error rejects the commit before the
	// builder runs (a revoked invocation, a closed session).
	Admit func(ctx context.Context, scratchTask storage.ID) error
	// Authorize runs after the plan and the structural validation, before
	// persistence, with the whole batch.
	Authorize func(ctx context.Context, batch storage.CommitBatch) error
	// AfterCommit runs after a batch is persisted and before the line is
	// released. It returns what must happen after the release (nil for
	// nothing). It must not block on anything outside the line.
	AfterCommit func(ctx context.Context, batch storage.CommitBatch, r storage.Range) (after func())
	// OnPersistenceError runs on the line when persistence failed or is
	// uncertain, before anything else can be admitted; it returns what must
	// happen after the release. A harness faults the session here: a later
	// plan must never see storage that its indexes do not know.
	OnPersistenceError func(ctx context.Context, err error) (after func())
	// Tracer, when set, gets one span per commit.
	Tracer trace.Tracer
	// Rules run on every main batch after the line's own structural
	// checks, in order, before Authorize; the first error rejects the
	// commit.
	Rules []BatchRule
}

// BatchRule checks a whole main batch against state as it stood before the
// batch: before is committed storage, never the batch's own writes. A
// broken rule is a *CommitError naming it (Rejectf builds one); any other
// error is the store's. The line runs the registered rules on every main
// commit, and ValidateBatch runs them on a stored batch, so a package of
// kinds owns its invariants without the kernel knowing them.
type BatchRule func(ctx context.Context, before storage.Storage, batch storage.CommitBatch) error

// NewLine returns a line over store. kinds is read, never changed, by the line.
func NewLine(rt Runtime, store storage.Storage, kinds *Kinds, opts LineOptions) *Line {
	l := &Line{store: store, kinds: kinds, lock: rt.NewLock("line"), opts: opts, tracer: opts.Tracer, rt: rt}
	if l.tracer == nil {
		l.tracer = noop.NewTracerProvider().Tracer("pico")
	}
	return l
}

// Store returns the line's storage, for reads outside the line.
func (l *Line) Store() storage.Storage { return l.store }

// Kinds returns the line's kind registry.
func (l *Line) Kinds() *Kinds { return l.kinds }

// Commit runs plan on the line and commits what it built as one main batch.
// Admission looks at the session's lifecycle and the caller's task identity,
// never at ctx's cancellation (§6.5): a cancelled task's write is rejected
// with ErrTaskCancelled by the mark, not by its signal, and persistence once
// admitted is never abandoned. The line is held only for plans, which never
// wait on the world, so waiting for it is bounded.
func (l *Line) Commit(ctx context.Context, plan func(tx *Tx) error) (storage.Range, error) {
	return l.run(ctx, 0, func(tx *Tx) error { return plan(tx) })
}

// Scratch runs plan on the line and commits what it built as one scratch
// batch of task.
func (l *Line) Scratch(ctx context.Context, task storage.ID, plan func(sc ScratchTx) error) (storage.Range, error) {
	if task <= 0 {
		return storage.Range{}, Rejectf(RuleUnknownTask, task, "scratch commit without a task")
	}
	return l.run(ctx, task, func(tx *Tx) error { return plan(ScratchTx{tx}) })
}

// Read runs fn on the line, so several reads see one committed state.
func (l *Line) Read(ctx context.Context, fn func(ctx context.Context) error) error {
	return l.Do(ctx, func() (func(), error) { return nil, fn(ctx) })
}

// Do runs fn on the line without committing anything (a driver decision,
// a registration); the function fn returns runs after the line is released.
// Do observes ctx only while waiting for the line.
func (l *Line) Do(ctx context.Context, fn func() (after func(), err error)) error {
	if err := l.refuseNested(ctx); err != nil {
		return err
	}
	if err := l.lock.Lock(ctx); err != nil {
		return err
	}
	after, err := func() (func(), error) {
		defer l.release()
		l.hold(ctx)
		return fn()
	}()
	if after != nil {
		after()
	}
	return err
}

func (l *Line) run(ctx context.Context, scratchTask storage.ID, plan func(tx *Tx) error) (storage.Range, error) {
	if err := l.refuseNested(ctx); err != nil {
		return storage.Range{}, err
	}
	admitted := admittedContext(ctx)
	if err := l.lock.Lock(admitted); err != nil {
		return storage.Range{}, err
	}
	r, after, err := l.locked(admitted, scratchTask, plan)
	if after != nil {
		after()
	}
	return r, err
}

// checkRules runs rules on a main batch; a scratch batch holds only its
// task's scratch, which no rule governs.
func checkRules(ctx context.Context, before storage.Storage, batch storage.CommitBatch, rules []BatchRule) error {
	if batch.Kind != storage.BatchMain {
		return nil
	}
	for _, rule := range rules {
		if err := rule(ctx, before, batch); err != nil {
			return err
		}
	}
	return nil
}

// admittedContext is ctx without its cancellation, for a commit that once
// admitted runs whole. Its invocation is looked up once and kept on top:
// a value read straight from context.WithoutCancel's context allocates,
// and a commit reads several. A method committing with its invocation's
// own ctx gets the admitted context the invocation made once.
func admittedContext(ctx context.Context) context.Context {
	inv := invocationOf(ctx)
	if inv != nil && ctx == inv.ctx {
		return inv.admitted
	}
	return admit(ctx, inv)
}

func admit(ctx context.Context, inv *invocation) context.Context {
	return context.WithValue(context.WithoutCancel(ctx), invocationKey{}, inv)
}

// locked is the part of a commit that holds the line, under the admitted
// context (admittedContext). Unlock is deferred so that a panicking plan
// releases the line; the panic itself propagates to the caller after its
// writes were discarded.
func (l *Line) locked(admitted context.Context, scratchTask storage.ID, plan func(tx *Tx) error) (storage.Range, func(), error) {
	defer l.release()
	if !plant.On("nested-line-call-waits") {
		l.hold(admitted)
	}
	if l.opts.Admit != nil {
		if err := l.opts.Admit(admitted, scratchTask); err != nil {
			return storage.Range{}, nil, err
		}
	}
	tx := l.tx(admitted)
	tx.scratchTask, tx.h = scratchTask, l.harness
	defer l.keep(tx)
	if err := plan(tx); err != nil {
		return storage.Range{}, nil, err
	}
	if tx.err != nil {
		return storage.Range{}, nil, tx.err
	}
	if len(tx.writes) == 0 {
		return storage.Range{First: tx.base + 1, Last: tx.base}, nil, nil
	}
	if err := tx.validate(); err != nil {
		return storage.Range{}, nil, err
	}
	batch := tx.batch()
	if err := checkRules(admitted, l.store, batch, l.opts.Rules); err != nil {
		return storage.Range{}, nil, err
	}
	if l.opts.Authorize != nil {
		if err := l.opts.Authorize(admitted, batch); err != nil {
			return storage.Range{}, nil, err
		}
	}
	spanCtx, span, traced := admitted, trace.Span(noop.Span{}), recording(l.tracer)
	if traced {
		spanCtx, span = startSpan(l.tracer, l.rt, admitted, "pico.commit", trace.WithAttributes(
			attribute.String("pico.batch", string(batch.Kind)),
			attribute.Int("pico.writes", len(batch.Writes)),
		))
	}
	r, err := l.store.Commit(spanCtx, batch)
	if err != nil {
		span.RecordError(err)
		endSpan := func() { span.End() }
		var be *storage.BatchError
		if errors.As(err, &be) {
			return storage.Range{}, endSpan, &CommitError{Rule: RuleStorage, ID: be.Seq, Err: err}
		}
		pe := &PersistenceError{Err: err}
		after := endSpan
		if l.opts.OnPersistenceError != nil {
			after = both(endSpan, l.opts.OnPersistenceError(admitted, pe))
		}
		return storage.Range{}, after, pe
	}
	if r.First != tx.base+1 {
		panic("core: storage numbered a batch from a sequence the line did not read")
	}
	var after func() // telemetry callbacks run after the line is released
	if traced {
		span.SetAttributes(attribute.Int64("pico.first", int64(r.First)), attribute.Int64("pico.last", int64(r.Last)))
		after = func() { span.End() }
	}
	if tx.h != nil {
		tx.h.d.tel.plan = tx.traces // read by the harness's AfterCommit, below
		tx.h.d.held = tx.held       // so are the starts a settling invocation holds back
	}
	if l.opts.AfterCommit != nil {
		after = both(after, l.opts.AfterCommit(admitted, batch, r))
	}
	return r, after, nil
}

// both runs first and then second, either of which may be nil.
func both(first, second func()) func() {
	switch {
	case first == nil:
		return second
	case second == nil:
		return first
	}
	return func() {
		first()
		second()
	}
}

// ErrNestedLineCall refuses a line call (a commit, a read, a decision)
// made from inside a plan running on the same line: it would wait for the
// plan that makes it, forever. The outer plan goes on and may return it.
var ErrNestedLineCall = errors.New("core: a line call from inside a plan on the same line: a plan never waits on the line")

// ActorRuntime is a runtime that names the actor calling it (the simulated
// one does: exactly one actor runs at a time). With it the line recognizes
// a nested call from any caller, by its actor; without it, from task code,
// by the invocation identity that rides in ctx, which also refuses a call
// from another goroutine of the invocation made while one of its own
// calls holds the line.
type ActorRuntime interface {
	Runtime
	Actor() any
}

// lineHolder is the caller running on the line.
type lineHolder struct {
	actor any
	inv   *invocation
}

// anonymousHolder is a caller that is no invocation, on a runtime that
// names no actor: nothing can recognize it as nested.
var anonymousHolder lineHolder

func (l *Line) hold(ctx context.Context) {
	inv := invocationOf(ctx)
	switch ar, ok := l.rt.(ActorRuntime); {
	case ok:
		l.holder.Store(&lineHolder{actor: ar.Actor(), inv: inv})
	case inv != nil:
		l.holder.Store(&inv.holds)
	default:
		l.holder.Store(&anonymousHolder)
	}
}

func (l *Line) release() {
	l.holder.Store(nil)
	l.lock.Unlock()
}

// refuseNested refuses a call from the caller that holds the line.
func (l *Line) refuseNested(ctx context.Context) error {
	h := l.holder.Load()
	if h == nil {
		return nil
	}
	if ar, ok := l.rt.(ActorRuntime); ok {
		// The actor is the caller: another actor of the same invocation
		// (a helper it started with its ctx) is not nested, and waits.
		if h.actor != nil && h.actor == ar.Actor() {
			return ErrNestedLineCall
		}
		return nil
	}
	if h.inv != nil && h.inv == invocationOf(ctx) {
		return ErrNestedLineCall
	}
	return nil
}
