package core

import (
	"context"
	"fmt"

	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/storage"
)

// PreviewKind is a task kind with a preview (§5.2, §9.4): a JSON value a
// watcher renders while the task runs. The harness builds it once per
// process from durable scratch (on first use, which covers attach and
// reopen); afterwards the invocation mutates the tracker TaskRuntime.Preview
// returns, and every successful scratch commit of the task flushes the
// tracker into delta ops (a task_output).
type PreviewKind interface {
	InitPreview(ctx context.Context, task *storage.Task, scratch ScratchReader) (any, error)
}

// ScratchReader reads a task's committed scratch.
type ScratchReader interface {
	GetValue(addr storage.Address) (storage.Version, bool, error)
	ReadList(addr storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error)
}

// TaskOutput is one flush of a task's preview: the ops that take a replica
// of the previous flush to the current preview.
type TaskOutput struct {
	Task storage.ID
	Ops  []delta.Op
}

// previewOf returns a live task's preview tracker, building it from scratch
// the first time. It runs on the line. nil means the kind has no preview.
func (h *Harness) previewOf(ctx context.Context, t *storage.Task) (*delta.Tracker, error) {
	if tr, ok := h.previews[t.ID]; ok {
		return tr, nil
	}
	k, _ := h.kinds.Task(t.Kind)
	pk, ok := k.(PreviewKind)
	if !ok {
		return nil, nil
	}
	// A copy: t may be the driver's record, which transactions read and no
	// kind may change.
	v, err := pk.InitPreview(ctx, cloneTask(t), ScratchTx{tx: newScratchReadTx(ctx, h.Store(), h.kinds, t.ID)})
	if err != nil {
		return nil, fmt.Errorf("core: preview of task %d: %w", t.ID, err)
	}
	// The first flush is the base (an r op), so that a watcher whose view
	// predates the preview gets it whole.
	tr := delta.NewTracker(v)
	if h.previews == nil {
		h.previews = map[storage.ID]*delta.Tracker{}
	}
	h.previews[t.ID] = tr
	return tr, nil
}

// newScratchReadTx is a scratch transaction used only to read.
func newScratchReadTx(ctx context.Context, store storage.Storage, kinds *Kinds, task storage.ID) *Tx {
	tx := newTx(ctx, store, kinds)
	tx.scratchTask = task
	return tx
}

// Preview returns the invocation's preview tracker (nil when its kind has
// none). Mutate it from the invocation's actor only; the harness flushes it
// after each of the task's scratch commits.
func (r *TaskRuntime) Preview(ctx context.Context) (*delta.Tracker, error) {
	if err := r.check(ctx); err != nil {
		return nil, err
	}
	var tr *delta.Tracker
	err := r.h.line.Read(ctx, func(ctx context.Context) error {
		lt := r.h.d.live[r.inv.task]
		if lt == nil {
			return fmt.Errorf("%w: task %d already settled", ErrStaleInvocation, r.inv.task)
		}
		var err error
		tr, err = r.h.previewOf(ctx, lt.task)
		return err
	})
	return tr, err
}

// Preview returns a live task's preview as of its last flush (its last
// scratch commit), built from durable scratch if this process has none yet.
// ok is false for a task that is not live or whose kind has no preview.
func (h *Harness) Preview(ctx context.Context, task storage.ID) (v any, ok bool, err error) {
	err = h.line.Read(ctx, func(ctx context.Context) error {
		lt := h.d.live[task]
		if lt == nil {
			return nil
		}
		tr, err := h.previewOf(ctx, lt.task)
		if err != nil || tr == nil {
			return err
		}
		v, ok = tr.Published(), true
		return nil
	})
	return v, ok, err
}

// flushPreview turns a task's preview changes since the last flush into a
// task output, after a scratch commit of the task. It runs on the line,
// where the invocation that mutates the tracker is waiting for its commit.
//
// When nothing receives the task's outputs (no watch of its conversation,
// no Options.OnTaskOutput) the changes are taken as published without
// computing their ops: a watch attached later captures the published
// value, and its first flush after that is a replacement when none was
// computed before, so every replica still folds to the preview.
func (h *Harness) flushPreview(task storage.ID, r storage.Range, acts *actions) {
	tr := h.previews[task]
	if tr == nil {
		return
	}
	if !h.outputObserved(task) {
		if tr.Dirty() {
			tr.Discard()
			h.markPublished(task)
		}
		return
	}
	ops := tr.Flush()
	if len(ops) == 0 {
		return
	}
	h.markPublished(task)
	h.watchOutput(task, ops, r.Last)
	if h.opts.OnTaskOutput != nil {
		out := TaskOutput{Task: task, Ops: ops}
		acts.add(func() { h.opts.OnTaskOutput(out) })
	}
}

// markPublished records that a task's preview has a published value, which
// a watch's capture then carries.
func (h *Harness) markPublished(task storage.ID) {
	if h.published == nil {
		h.published = map[storage.ID]bool{}
	}
	h.published[task] = true
}

// outputObserved reports whether anything receives a live task's outputs.
func (h *Harness) outputObserved(task storage.ID) bool {
	if h.opts.OnTaskOutput != nil {
		return true
	}
	lt := h.d.live[task]
	return lt != nil && len(h.watchers[lt.task.ConversationID]) > 0
}
