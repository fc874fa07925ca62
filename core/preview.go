package core

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pico-go/pico/core/ai"
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
	v, err := pk.InitPreview(ctx, t, ScratchTx{tx: newScratchReadTx(ctx, h.Store(), h.kinds, t.ID)})
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
func (h *Harness) flushPreview(task storage.ID, r storage.Range, acts *actions) {
	tr := h.previews[task]
	if tr == nil {
		return
	}
	ops := tr.Flush()
	if len(ops) == 0 {
		return
	}
	if h.published == nil {
		h.published = map[storage.ID]bool{}
	}
	h.published[task] = true
	h.watchOutput(task, ops, r.Last)
	if h.opts.OnTaskOutput != nil {
		out := TaskOutput{Task: task, Ops: ops}
		acts.add(func() { h.opts.OnTaskOutput(out) })
	}
}

// previewValue turns a Go value into the preview's JSON representation.
func previewValue(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return delta.ParseValue(raw)
}

// streamPreview keeps a generation's preview, the partial assistant
// message, in step with the frames it streams, mirroring ai.ReduceFrames
// so that a preview built from durable frames after a reopen equals the
// live one. Each frame is one small tracker mutation: a token appends to
// one string, so its flush is one a op.
type streamPreview struct {
	tr     *delta.Tracker
	blocks []ai.Block
	tools  map[int][]byte // tool-call JSON buffers, nil until a delta or checkpoint
}

func (p *streamPreview) apply(f ai.Frame) error {
	if p == nil || p.tr == nil {
		return nil
	}
	content := func(i int, rest ...any) delta.Path { return append(delta.Path{"content", i}, rest...) }
	switch f.Type {
	case ai.FrameStart:
		m := *f.Partial
		m.Content, m.StopReason = ai.Content{Blocks: []ai.Block{}}, ai.StopPending
		p.blocks, p.tools = nil, map[int][]byte{}
		v, err := previewValue(m)
		if err != nil {
			return err
		}
		return p.tr.Replace(v)
	case ai.FrameTextStart, ai.FrameThinkingStart, ai.FrameToolCallStart:
		var b ai.Block
		switch {
		case f.Type == ai.FrameToolCallStart && f.ToolCall != nil:
			b = *f.ToolCall
		case f.Type != ai.FrameToolCallStart && f.Content != nil:
			b = *f.Content
		}
		b.Type = map[ai.FrameType]ai.BlockType{ai.FrameTextStart: ai.BlockText, ai.FrameThinkingStart: ai.BlockThinking, ai.FrameToolCallStart: ai.BlockToolCall}[f.Type]
		p.blocks = append(p.blocks, b)
		v, err := previewValue(b)
		if err != nil {
			return err
		}
		return p.tr.Push(delta.Path{"content"}, v)
	}
	i := f.ContentIndex
	if i < 0 || i >= len(p.blocks) {
		return fmt.Errorf("core: preview: %s frame for block %d of %d", f.Type, i, len(p.blocks))
	}
	b := &p.blocks[i]
	switch f.Type {
	case ai.FrameTextDelta:
		b.Text += f.Delta
		return p.tr.AppendString(content(i, "text"), f.Delta)
	case ai.FrameThinkingDelta:
		b.Thinking += f.Delta
		return p.tr.AppendString(content(i, "thinking"), f.Delta)
	case ai.FrameTextEnd:
		b.Text, b.TextSignature = f.EndContent, f.TextSignature
	case ai.FrameThinkingEnd:
		b.Thinking, b.ThinkingSignature, b.Redacted = f.EndContent, f.ThinkingSignature, f.Redacted
	case ai.FrameToolCallCheckpoint, ai.FrameToolCallDelta:
		buf := p.tools[i]
		if f.Type == ai.FrameToolCallCheckpoint {
			buf = []byte(f.JSON)
		} else {
			buf = append(buf, f.Delta...)
		}
		p.tools[i] = buf
		// As the reducer does for a call that has not ended: the buffer
		// once it is JSON, {} until then.
		b.Arguments = json.RawMessage(`{}`)
		if json.Valid(buf) {
			b.Arguments = json.RawMessage(buf)
		}
	case ai.FrameToolCallEnd:
		delete(p.tools, i)
		*b = ai.Block{Type: ai.BlockToolCall, ID: f.ID, Name: f.Name, Arguments: f.Arguments,
			ThoughtSignature: f.ThoughtSignature, Namespace: f.Namespace}
	}
	v, err := previewValue(*b)
	if err != nil {
		return err
	}
	return p.tr.Set(content(i), v)
}
