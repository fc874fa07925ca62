package agent

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/internal/jsonvalue"
)

// streamPreview keeps a generation's preview, the partial assistant
// message, in step with the frames it streams, mirroring ai.ReduceFrames
// so that a preview built from durable frames after a reopen equals the
// live one. Each frame is one small tracker mutation: a token appends to
// one string, so its flush is one a op. While nothing watches the preview
// (watched reports false) only the blocks are kept: the harness rebuilds
// the preview from the durable frames when something does.
type streamPreview struct {
	tr      *delta.Tracker
	watched func() bool // TaskRuntime.PreviewWatched
	blocks  []ai.Block
	tools   map[int][]byte // tool-call JSON buffers, nil until a delta or checkpoint
}

func (p *streamPreview) apply(f ai.Frame) error {
	if p == nil || p.tr == nil {
		return nil
	}
	track := p.watched()
	content := func(i int, rest ...any) delta.Path { return append(delta.Path{"content", i}, rest...) }
	switch f.Type {
	case ai.FrameStart:
		m := *f.Partial
		m.Content, m.StopReason = ai.Content{Blocks: []ai.Block{}}, ai.StopPending
		p.blocks, p.tools = nil, map[int][]byte{}
		if !track {
			return nil
		}
		v, err := delta.ValueOf(m)
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
		if !track {
			return nil
		}
		v, err := delta.ValueOf(b)
		if err != nil {
			return err
		}
		return p.tr.Push(delta.Path{"content"}, v)
	}
	i := f.ContentIndex
	if i < 0 || i >= len(p.blocks) {
		return fmt.Errorf("agent: preview: %s frame for block %d of %d", f.Type, i, len(p.blocks))
	}
	b := &p.blocks[i]
	switch f.Type {
	case ai.FrameTextDelta:
		b.Text += f.Delta
		if !track {
			return nil
		}
		return p.tr.AppendString(content(i, "text"), f.Delta)
	case ai.FrameThinkingDelta:
		b.Thinking += f.Delta
		if !track {
			return nil
		}
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
		if !track {
			return nil // the arguments below are the preview's alone
		}
		// As the reducer does for a call that has not ended: the buffer
		// once it is JSON, {} until then.
		b.Arguments = json.RawMessage(`{}`)
		if jsonvalue.Valid(buf) {
			b.Arguments = json.RawMessage(buf)
		}
	case ai.FrameToolCallEnd:
		delete(p.tools, i)
		*b = ai.Block{Type: ai.BlockToolCall, ID: f.ID, Name: f.Name, Arguments: f.Arguments,
			ThoughtSignature: f.ThoughtSignature, Namespace: f.Namespace}
	}
	if !track {
		return nil
	}
	v, err := blockValue(*b)
	if err != nil {
		return err
	}
	return p.tr.Set(content(i), v)
}

// blockValue is delta.ValueOf(b), the block as its JSON reads back, built
// without the JSON: a streamed block's preview is rebuilt at every delta.
// A block whose text is not UTF-8 or whose arguments are not JSON takes
// the round trip, which decides what encoding/json makes of them; the
// tests hold the two to the same values.
func blockValue(b ai.Block) (any, error) {
	m := map[string]any{"type": string(b.Type)}
	for _, f := range [...]struct {
		key, val string
	}{
		{"text", b.Text}, {"textSignature", b.TextSignature}, {"thinking", b.Thinking}, {"thinkingSignature", b.ThinkingSignature},
		{"data", b.Data}, {"mimeType", b.MimeType}, {"id", b.ID}, {"name", b.Name}, {"thoughtSignature", b.ThoughtSignature},
		{"namespace", b.Namespace},
	} {
		if !utf8.ValidString(f.val) {
			return delta.ValueOf(b)
		}
		if f.val != "" {
			m[f.key] = f.val
		}
	}
	if !utf8.ValidString(string(b.Type)) {
		return delta.ValueOf(b)
	}
	if b.Redacted {
		m["redacted"] = true
	}
	args := b.Arguments
	if b.Type == ai.BlockToolCall && len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	if len(args) > 0 {
		v, err := delta.ParseValue(args)
		if err != nil {
			return delta.ValueOf(b)
		}
		m["arguments"] = v
	}
	switch {
	case b.Type == ai.BlockText && b.Text == "":
		m["text"] = ""
	case b.Type == ai.BlockThinking && b.Thinking == "":
		m["thinking"] = ""
	}
	return m, nil
}
