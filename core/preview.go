package core

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync/atomic"

	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/internal/plant"
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

// taskPreview is a live task's preview: the tracker its invocation
// mutates, and what lets the invocation leave it alone while nothing
// receives it (TaskRuntime.PreviewWatched).
type taskPreview struct {
	// tr is built on the line when first needed; nil until then.
	tr *delta.Tracker
	// watched is whether anything received the task's outputs at its last
	// scratch commit; the harness sets it on the line, the invocation reads it.
	watched atomic.Bool
	// stale is set by the invocation when it left a change out; the
	// harness rebuilds the tracker from durable scratch before anything
	// reads it, and clears stale at the first flush after a rebuild.
	stale atomic.Bool
}

// previewHolder returns a live task's preview, without a tracker until
// one is built, or nil when its kind has none. The driver gives it to
// every invocation it reserves, so that the invocation reaches it without
// the line. It runs on the line.
func (h *Harness) previewHolder(t *storage.Task) *taskPreview {
	if p, ok := h.previews[t.ID]; ok {
		return p
	}
	k, _ := h.kinds.Task(t.Kind)
	if _, ok := k.(PreviewKind); !ok {
		return nil
	}
	p := &taskPreview{}
	p.watched.Store(h.outputObserved(t.ID))
	if h.previews == nil {
		h.previews = map[storage.ID]*taskPreview{}
	}
	h.previews[t.ID] = p
	return p
}

// previewOf returns a live task's preview, its tracker built from scratch
// the first time. It runs on the line. nil means the kind has no preview.
func (h *Harness) previewOf(ctx context.Context, t *storage.Task) (*taskPreview, error) {
	p := h.previewHolder(t)
	if p == nil || p.tr != nil {
		return p, nil
	}
	v, _, err := h.initPreview(ctx, t)
	if err != nil {
		return nil, err
	}
	// The first flush is the base (an r op), so that a watcher whose view
	// predates the preview gets it whole.
	p.tr = delta.NewTracker(v)
	return p, nil
}

// initPreview builds a live task's preview from its durable scratch; ok is
// false when its kind has none. It runs on the line.
func (h *Harness) initPreview(ctx context.Context, t *storage.Task) (v any, ok bool, err error) {
	k, _ := h.kinds.Task(t.Kind)
	pk, ok := k.(PreviewKind)
	if !ok {
		return nil, false, nil
	}
	// A copy: t may be the driver's record, which transactions read and no
	// kind may change.
	v, err = pk.InitPreview(ctx, cloneTask(t), ScratchTx{tx: newScratchReadTx(ctx, h.Store(), h.kinds, t.ID)})
	if err != nil {
		return nil, false, fmt.Errorf("core: preview of task %d: %w", t.ID, err)
	}
	return v, true, nil
}

// current brings a preview the invocation left stale up to date from the
// task's durable scratch, for a reader on the line; it stays stale, since
// a change left out may not be durable yet. It runs on the line.
func (h *Harness) current(ctx context.Context, task storage.ID, p *taskPreview) error {
	if !p.stale.Load() || plant.On("stale-preview-read-unrebuilt") {
		return nil
	}
	return h.rebuild(ctx, task, p)
}

// rebuild replaces a preview with what the task's durable scratch builds.
func (h *Harness) rebuild(ctx context.Context, task storage.ID, p *taskPreview) error {
	lt := h.d.live[task]
	if lt == nil {
		return nil
	}
	v, _, err := h.initPreview(ctx, lt.task)
	if err != nil {
		return err
	}
	return p.tr.Reset(v)
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
	var p *taskPreview
	err := r.h.line.Read(ctx, func(ctx context.Context) error {
		lt := r.h.d.live[r.inv.task]
		if lt == nil {
			return fmt.Errorf("%w: task %d already settled", ErrStaleInvocation, r.inv.task)
		}
		var err error
		p, err = r.h.previewOf(ctx, lt.task)
		return err
	})
	if err != nil || p == nil {
		return nil, err
	}
	return p.tr, nil
}

// PreviewWatched reports whether anything receives the task's preview (a
// watch of its conversation, Options.OnTaskOutput) as of the task's last
// scratch commit. While it reports false the invocation may leave the
// tracker Preview returned alone: the harness then rebuilds the preview
// from the task's durable scratch (the kind's InitPreview) before anything
// reads or receives it. So a change left out must be one that the
// invocation's next scratch commit makes durable, as the changes of a
// preview kept in step with its scratch are. A kind whose preview is
// costly to keep skips that work while nobody looks. For a kind without a
// preview it reports false.
func (r *TaskRuntime) PreviewWatched() bool {
	p := r.inv.preview
	if p == nil {
		return false
	}
	if p.watched.Load() {
		return true
	}
	p.stale.Store(true)
	return false
}

// ResetPreview has the harness rebuild the task's preview from its durable
// scratch (the kind's InitPreview) at the task's next scratch commit, and
// before anything reads it: for a kind about to change its scratch in a
// way its tracker does not follow, as a new attempt that clears the last
// one's output does. It does nothing for a kind without a preview.
func (r *TaskRuntime) ResetPreview() {
	if p := r.inv.preview; p != nil {
		p.stale.Store(true)
	}
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
		p, err := h.previewOf(ctx, lt.task)
		if err != nil || p == nil {
			return err
		}
		if err := h.current(ctx, task, p); err != nil {
			return err
		}
		v, ok = p.tr.Published(), true
		if plant.On("preview-reads-unflushed") {
			v = p.tr.State()
		}
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
//
// A preview the invocation left stale (PreviewWatched) is rebuilt from
// durable scratch once something receives it: the commit just made every
// change it left out durable, so the preview is whole again, and its next
// flush is a replacement. A rebuild that fails is reported and tried again
// at the next commit.
func (h *Harness) flushPreview(ctx context.Context, task storage.ID, r storage.Range, acts *actions) {
	p := h.previews[task]
	if p == nil {
		return
	}
	observed := h.outputObserved(task)
	p.watched.Store(observed)
	if p.tr == nil {
		return // nothing built it: whoever needs it builds it from scratch
	}
	if p.stale.Load() {
		if !observed {
			h.markPublished(task) // whoever reads it rebuilds it
			return
		}
		if err := h.rebuild(ctx, task, p); err != nil {
			h.report(err)
			return
		}
		p.stale.Store(false)
	}
	defer h.assertPreview(ctx, task, p)
	tr := p.tr
	if !observed {
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

// assertPreview panics with a *DriverInvariantError when
// Options.CheckPreviews is set and a preview the invocation kept in step
// (not stale) differs, once published, from what the task's durable scratch
// builds: a preview left alone while nobody watched is rebuilt from that,
// so the two must agree. A rebuild that fails proves nothing.
func (h *Harness) assertPreview(ctx context.Context, task storage.ID, p *taskPreview) {
	if h.opts.CheckPreviews && p.tr != nil {
		h.assertDurablePreview(ctx, task, p, p.tr.Published(), "preview")
	}
}

// assertDurablePreview panics with the *DriverInvariantError invariant
// when Options.CheckPreviews is set, p is in step (not stale) and got, the
// preview of task something delivers, differs from what the task's durable
// scratch builds. A capture's preview is held to it as a flush's is: what
// the flushes published, never what the producer holds mid-window.
func (h *Harness) assertDurablePreview(ctx context.Context, task storage.ID, p *taskPreview, got any, invariant string) {
	// After a persistence fault the durable scratch may hold an uncertain
	// batch this process never learned of: the two need not agree.
	if !h.opts.CheckPreviews || p.stale.Load() || h.d.phase == phaseFaulted {
		return
	}
	lt := h.d.live[task]
	if lt == nil {
		return
	}
	v, _, err := h.initPreview(ctx, lt.task)
	if err != nil {
		return
	}
	if !reflect.DeepEqual(got, v) {
		panic(&DriverInvariantError{Invariant: invariant, Detail: fmt.Sprintf(
			"task %d's preview is %s; its durable scratch builds %s", task, previewText(got), previewText(v))})
	}
}

// previewText is a preview value as JSON, for a message.
func previewText(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(raw)
}
