package core

import (
	"context"
	"errors"

	"github.com/pico-go/pico/storage"
)

// Line is the commit line: every mutation of a session goes through it, one
// plan at a time. A plan builds a batch with a Tx (minting final ids as it
// goes), the line validates the whole batch, persists it, runs the
// after-commit step (index updates, publication) and only then releases.
// Plans that fail, break a rule or panic write nothing and consume no ids.
type Line struct {
	store storage.Storage
	kinds *Kinds
	lock  Lock

	afterCommit func(storage.CommitBatch, storage.Range)
}

// LineOptions configures a line.
type LineOptions struct {
	// AfterCommit runs on the line after a batch is persisted and before the
	// line is released: the place to update indexes and queue publication.
	// It must not block on anything outside the line.
	AfterCommit func(storage.CommitBatch, storage.Range)
}

// NewLine returns a line over store. kinds is read, never changed, by the line.
func NewLine(rt Runtime, store storage.Storage, kinds *Kinds, opts LineOptions) *Line {
	return &Line{store: store, kinds: kinds, lock: rt.NewLock("line"), afterCommit: opts.AfterCommit}
}

// Store returns the line's storage, for reads outside the line.
func (l *Line) Store() storage.Storage { return l.store }

// Kinds returns the line's kind registry.
func (l *Line) Kinds() *Kinds { return l.kinds }

// Commit runs plan on the line and commits what it built as one main batch.
// ctx bounds only the wait for the line: once a plan is admitted, its
// persistence is never abandoned because ctx is cancelled.
func (l *Line) Commit(ctx context.Context, plan func(tx *Tx) error) (storage.Range, error) {
	return l.run(ctx, 0, func(tx *Tx) error { return plan(tx) })
}

// Scratch runs plan on the line and commits what it built as one scratch
// batch of task.
func (l *Line) Scratch(ctx context.Context, task storage.ID, plan func(sc ScratchTx) error) (storage.Range, error) {
	if task <= 0 {
		return storage.Range{}, rejectf(RuleUnknownTask, task, "scratch commit without a task")
	}
	return l.run(ctx, task, func(tx *Tx) error { return plan(ScratchTx{tx}) })
}

// Read runs fn on the line, so several reads see one committed state.
func (l *Line) Read(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := l.lock.Lock(ctx); err != nil {
		return err
	}
	defer l.lock.Unlock()
	return fn(ctx)
}

func (l *Line) run(ctx context.Context, scratchTask storage.ID, plan func(tx *Tx) error) (storage.Range, error) {
	if err := l.lock.Lock(ctx); err != nil {
		return storage.Range{}, err
	}
	// Unlock is deferred so that a panicking plan releases the line; the
	// panic itself propagates to the caller after its writes were discarded.
	defer l.lock.Unlock()
	admitted := context.WithoutCancel(ctx)
	tx := newTx(admitted, l.store, l.kinds)
	tx.scratchTask = scratchTask
	if err := plan(tx); err != nil {
		return storage.Range{}, err
	}
	if tx.err != nil {
		return storage.Range{}, tx.err
	}
	if len(tx.writes) == 0 {
		return storage.Range{First: tx.base + 1, Last: tx.base}, nil
	}
	if err := tx.validate(); err != nil {
		return storage.Range{}, err
	}
	batch := tx.batch()
	r, err := l.store.Commit(admitted, batch)
	if err != nil {
		var be *storage.BatchError
		if errors.As(err, &be) {
			return storage.Range{}, &CommitError{Rule: RuleStorage, ID: be.Seq, Err: err}
		}
		return storage.Range{}, err
	}
	if r.First != tx.base+1 {
		panic("core: storage numbered a batch from a sequence the line did not read")
	}
	if l.afterCommit != nil {
		l.afterCommit(batch, r)
	}
	return r, nil
}
