package ai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/internal/plant"
)

// FrameType discriminates compact assistant-message frames.
type FrameType string

const (
	FrameStart              FrameType = "start"
	FrameTextStart          FrameType = "text_start"
	FrameTextDelta          FrameType = "text_delta"
	FrameTextEnd            FrameType = "text_end"
	FrameThinkingStart      FrameType = "thinking_start"
	FrameThinkingDelta      FrameType = "thinking_delta"
	FrameThinkingEnd        FrameType = "thinking_end"
	FrameToolCallStart      FrameType = "toolcall_start"
	FrameToolCallCheckpoint FrameType = "toolcall_checkpoint"
	FrameToolCallDelta      FrameType = "toolcall_delta"
	FrameToolCallEnd        FrameType = "toolcall_end"
)

func (t FrameType) valid() bool {
	switch t {
	case FrameStart, FrameTextStart, FrameTextDelta, FrameTextEnd,
		FrameThinkingStart, FrameThinkingDelta, FrameThinkingEnd,
		FrameToolCallStart, FrameToolCallCheckpoint, FrameToolCallDelta, FrameToolCallEnd:
		return true
	}
	return false
}

// Frame is one compact frame of an assistant message in progress (reference
// delta-and-messages §4). Unlike a StreamEvent it carries no live partial:
// replaying the frames of a stream with ReduceFrames rebuilds the message.
// Type selects the meaningful fields:
//
//   - start: Partial, a copy of the message with empty content and stopReason
//     pending.
//   - text_start, thinking_start: ContentIndex and Content, a copy of the
//     block as it was at start.
//   - text_delta, thinking_delta, toolcall_delta: ContentIndex and Delta.
//   - text_end: ContentIndex, EndContent (JSON "content", a string) and
//     TextSignature.
//   - thinking_end: ContentIndex, EndContent, ThinkingSignature and Redacted.
//   - toolcall_start: ContentIndex and ToolCall, the call as it was at start.
//   - toolcall_checkpoint: ContentIndex and JSON, the argument text so far.
//   - toolcall_end: ContentIndex, ID, Name, Arguments, ThoughtSignature and
//     Namespace.
//
// In JSON the start blocks and the end text both use the reference name
// "content" (a block object or a string, by Type). ContentIndex is written
// for every frame but start.
type Frame struct {
	Type              FrameType       `json:"type"`
	Partial           *Message        `json:"partial,omitempty"`
	ContentIndex      int             `json:"contentIndex"`
	Content           *Block          `json:"-"`
	EndContent        string          `json:"-"`
	Delta             string          `json:"delta,omitempty"`
	TextSignature     string          `json:"textSignature,omitempty"`
	ThinkingSignature string          `json:"thinkingSignature,omitempty"`
	Redacted          bool            `json:"redacted,omitempty"`
	ToolCall          *Block          `json:"toolCall,omitempty"`
	JSON              string          `json:"json,omitempty"`
	ID                string          `json:"id,omitempty"`
	Name              string          `json:"name,omitempty"`
	Arguments         json.RawMessage `json:"arguments,omitempty"`
	ThoughtSignature  string          `json:"thoughtSignature,omitempty"`
	Namespace         string          `json:"namespace,omitempty"`
}

// frameJSON is the wire form of a Frame: "content" is raw so it can hold a
// block (starts) or a string (ends), and contentIndex is optional so the
// start frame omits it.
type frameJSON struct {
	Type              FrameType       `json:"type"`
	Partial           *Message        `json:"partial,omitempty"`
	ContentIndex      *int            `json:"contentIndex,omitempty"`
	Content           json.RawMessage `json:"content,omitempty"`
	Delta             string          `json:"delta,omitempty"`
	TextSignature     string          `json:"textSignature,omitempty"`
	ThinkingSignature string          `json:"thinkingSignature,omitempty"`
	Redacted          bool            `json:"redacted,omitempty"`
	ToolCall          *Block          `json:"toolCall,omitempty"`
	JSON              string          `json:"json,omitempty"`
	ID                string          `json:"id,omitempty"`
	Name              string          `json:"name,omitempty"`
	Arguments         json.RawMessage `json:"arguments,omitempty"`
	ThoughtSignature  string          `json:"thoughtSignature,omitempty"`
	Namespace         string          `json:"namespace,omitempty"`
}

// MarshalJSON writes the frame in its reference shape.
func (f Frame) MarshalJSON() ([]byte, error) { return jsonvalue.Appended(f.AppendJSON) }

// AppendJSON appends what MarshalJSON writes to buf, and what json.Marshal
// writes of the frame, byte for byte: by hand, but for a partial message
// Message.AppendJSON would not write by hand and arguments encoding/json
// would rewrite (jsonvalue.AppendRaw), which go through encoding/json with
// the rest of the frame.
func (f Frame) AppendJSON(buf []byte) ([]byte, error) {
	if out, ok := f.appendPlain(buf); ok {
		return out, nil
	}
	raw, err := f.marshalReflect()
	return append(buf, raw...), err
}

// appendPlain writes the frame as marshalReflect does, or reports false,
// appending nothing.
func (f Frame) appendPlain(buf []byte) ([]byte, bool) {
	start := len(buf)
	buf = append(buf, `{"type":`...)
	buf = jsonvalue.AppendString(buf, string(f.Type))
	var ok bool
	if f.Partial != nil {
		if buf, ok = f.Partial.appendPlain(append(buf, `,"partial":`...)); !ok {
			return buf[:start], false
		}
	}
	if f.Type != FrameStart {
		buf = append(buf, `,"contentIndex":`...)
		buf = strconv.AppendInt(buf, int64(f.ContentIndex), 10)
	}
	switch f.Type {
	case FrameTextStart, FrameThinkingStart:
		if f.Content != nil {
			if buf, ok = f.Content.appendPlain(append(buf, `,"content":`...)); !ok {
				return buf[:start], false
			}
		}
	case FrameTextEnd, FrameThinkingEnd:
		buf = jsonvalue.AppendString(append(buf, `,"content":`...), f.EndContent)
	}
	buf = appendMember(buf, `,"delta":`, f.Delta)
	buf = appendMember(buf, `,"textSignature":`, f.TextSignature)
	buf = appendMember(buf, `,"thinkingSignature":`, f.ThinkingSignature)
	if f.Redacted {
		buf = append(buf, `,"redacted":true`...)
	}
	if f.ToolCall != nil {
		if buf, ok = f.ToolCall.appendPlain(append(buf, `,"toolCall":`...)); !ok {
			return buf[:start], false
		}
	}
	buf = appendMember(buf, `,"json":`, f.JSON)
	buf = appendMember(buf, `,"id":`, f.ID)
	buf = appendMember(buf, `,"name":`, f.Name)
	if buf, ok = appendArguments(buf, f.Arguments, f.Type == FrameToolCallEnd); !ok {
		return buf[:start], false
	}
	buf = appendMember(buf, `,"thoughtSignature":`, f.ThoughtSignature)
	buf = appendMember(buf, `,"namespace":`, f.Namespace)
	return append(buf, '}'), true
}

// marshalReflect writes the frame through its wire form.
func (f Frame) marshalReflect() ([]byte, error) {
	w := frameJSON{
		Type: f.Type, Partial: f.Partial, Delta: f.Delta,
		TextSignature: f.TextSignature, ThinkingSignature: f.ThinkingSignature, Redacted: f.Redacted,
		ToolCall: f.ToolCall, JSON: f.JSON, ID: f.ID, Name: f.Name, Arguments: f.Arguments,
		ThoughtSignature: f.ThoughtSignature, Namespace: f.Namespace,
	}
	if f.Type != FrameStart {
		idx := f.ContentIndex
		w.ContentIndex = &idx
	}
	var err error
	switch f.Type {
	case FrameTextStart, FrameThinkingStart:
		if f.Content != nil {
			if w.Content, err = json.Marshal(f.Content); err != nil {
				return nil, err
			}
		}
	case FrameTextEnd, FrameThinkingEnd:
		if w.Content, err = json.Marshal(f.EndContent); err != nil {
			return nil, err
		}
	case FrameToolCallEnd:
		if len(w.Arguments) == 0 {
			w.Arguments = json.RawMessage(`{}`)
		}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a frame and rejects an unknown type.
func (f *Frame) UnmarshalJSON(data []byte) error {
	var w frameJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	if !w.Type.valid() {
		return fmt.Errorf("ai: unknown frame type %q", w.Type)
	}
	out := Frame{
		Type: w.Type, Partial: w.Partial, Delta: w.Delta,
		TextSignature: w.TextSignature, ThinkingSignature: w.ThinkingSignature, Redacted: w.Redacted,
		ToolCall: w.ToolCall, JSON: w.JSON, ID: w.ID, Name: w.Name, Arguments: w.Arguments,
		ThoughtSignature: w.ThoughtSignature, Namespace: w.Namespace,
	}
	if w.ContentIndex != nil {
		out.ContentIndex = *w.ContentIndex
	}
	if len(w.Content) > 0 {
		switch w.Type {
		case FrameTextStart, FrameThinkingStart:
			var b Block
			if err := json.Unmarshal(w.Content, &b); err != nil {
				return err
			}
			out.Content = &b
		case FrameTextEnd, FrameThinkingEnd:
			if err := json.Unmarshal(w.Content, &out.EndContent); err != nil {
				return err
			}
		}
	}
	*f = out
	return nil
}

// FrameEncoder turns the events of one stream into frames. Use one encoder
// per stream; the zero value is ready.
type FrameEncoder struct {
	started  bool
	finished bool
	blocks   map[int]*encBlock
}

type encBlock struct {
	typ   BlockType
	ended bool
	// skip is how many characters (runes) of text or thinking the start
	// snapshot already held and later deltas must not repeat.
	skip int
	// want is non-empty while tool-call deltas are buffered: the compact
	// snapshot arguments without their closing bracket.
	want string
	buf  []byte
}

// Encode returns the frame for ev, or ok=false when ev produces none: done
// and error events (settlement and final usage must be stored separately),
// and deltas the start snapshot already covers. It returns an error for an
// event before start (but for error or done, which may come without one),
// after a terminal event, a second start, a block started twice, a block
// event of the wrong type, or a delta or end for a block not started or
// already ended.
func (e *FrameEncoder) Encode(ev StreamEvent) (Frame, bool, error) {
	if e.finished {
		return Frame{}, false, fmt.Errorf("ai: frame encoder: %s event after the stream ended", ev.Type)
	}
	if ev.Terminal() {
		e.finished = true
		return Frame{}, false, nil
	}
	if ev.Type == EventStart {
		if e.started {
			return Frame{}, false, errors.New("ai: frame encoder: second start event")
		}
		if ev.Partial == nil {
			return Frame{}, false, errors.New("ai: frame encoder: start event without partial")
		}
		e.started = true
		p := copyMessage(ev.Partial)
		p.Content = Content{Blocks: []Block{}}
		p.StopReason = StopPending
		return Frame{Type: FrameStart, Partial: p}, true, nil
	}
	if !e.started {
		return Frame{}, false, fmt.Errorf("ai: frame encoder: %s event before start", ev.Type)
	}
	idx := ev.ContentIndex
	switch ev.Type {
	case EventTextStart, EventThinkingStart, EventToolCallStart:
		typ := eventBlockType(ev.Type)
		if _, dup := e.blocks[idx]; dup {
			return Frame{}, false, fmt.Errorf("ai: frame encoder: block %d started twice", idx)
		}
		snap := Block{Type: typ}
		if b, ok := partialBlock(ev.Partial, idx); ok {
			if b.Type != typ {
				return Frame{}, false, fmt.Errorf("ai: frame encoder: %s event for a %s block at %d", ev.Type, b.Type, idx)
			}
			snap = copyBlock(b)
		}
		st := &encBlock{typ: typ}
		if e.blocks == nil {
			e.blocks = map[int]*encBlock{}
		}
		e.blocks[idx] = st
		switch typ {
		case BlockText:
			st.skip = utf8.RuneCountInString(snap.Text)
			if plant.On("frame-delta-untrimmed") {
				st.skip = 0
			}
			if plant.On("frame-start-content-dropped") {
				return Frame{Type: FrameTextStart, ContentIndex: idx}, true, nil
			}
			return Frame{Type: FrameTextStart, ContentIndex: idx, Content: &snap}, true, nil
		case BlockThinking:
			st.skip = utf8.RuneCountInString(snap.Thinking)
			return Frame{Type: FrameThinkingStart, ContentIndex: idx, Content: &snap}, true, nil
		default:
			st.want = argsPrefix(snap.Arguments)
			return Frame{Type: FrameToolCallStart, ContentIndex: idx, ToolCall: &snap}, true, nil
		}
	}

	typ := eventBlockType(ev.Type)
	if typ == "" {
		return Frame{}, false, fmt.Errorf("ai: frame encoder: unknown event type %q", ev.Type)
	}
	st, ok := e.blocks[idx]
	switch {
	case !ok:
		return Frame{}, false, fmt.Errorf("ai: frame encoder: %s event for block %d, which has not started", ev.Type, idx)
	case st.typ != typ:
		return Frame{}, false, fmt.Errorf("ai: frame encoder: %s event for a %s block at %d", ev.Type, st.typ, idx)
	case st.ended:
		return Frame{}, false, fmt.Errorf("ai: frame encoder: %s event for block %d, which has ended", ev.Type, idx)
	}

	switch ev.Type {
	case EventTextDelta, EventThinkingDelta:
		d := st.trim(ev.Delta)
		if d == "" {
			return Frame{}, false, nil
		}
		ft := FrameTextDelta
		if typ == BlockThinking {
			ft = FrameThinkingDelta
		}
		return Frame{Type: ft, ContentIndex: idx, Delta: d}, true, nil
	case EventToolCallDelta:
		if st.want == "" {
			if ev.Delta == "" {
				return Frame{}, false, nil
			}
			return Frame{Type: FrameToolCallDelta, ContentIndex: idx, Delta: ev.Delta}, true, nil
		}
		st.buf = append(st.buf, ev.Delta...)
		if !strings.HasPrefix(stripJSONSpace(st.buf), st.want) {
			return Frame{}, false, nil
		}
		f := Frame{Type: FrameToolCallCheckpoint, ContentIndex: idx, JSON: string(st.buf)}
		if plant.On("frame-checkpoint-last-delta-only") {
			f.JSON = ev.Delta
		}
		st.want, st.buf = "", nil
		return f, true, nil
	case EventTextEnd:
		st.ended = true
		f := Frame{Type: FrameTextEnd, ContentIndex: idx, EndContent: ev.Content}
		if b, ok := partialBlock(ev.Partial, idx); ok {
			f.TextSignature = b.TextSignature
		}
		return f, true, nil
	case EventThinkingEnd:
		st.ended = true
		f := Frame{Type: FrameThinkingEnd, ContentIndex: idx, EndContent: ev.Content}
		if b, ok := partialBlock(ev.Partial, idx); ok {
			f.ThinkingSignature, f.Redacted = b.ThinkingSignature, b.Redacted
		}
		return f, true, nil
	default: // EventToolCallEnd
		tc := ev.ToolCall
		if tc == nil {
			b, ok := partialBlock(ev.Partial, idx)
			if !ok {
				return Frame{}, false, fmt.Errorf("ai: frame encoder: toolcall_end for block %d without toolCall", idx)
			}
			tc = &b
		}
		st.ended = true
		return Frame{
			Type: FrameToolCallEnd, ContentIndex: idx,
			ID: tc.ID, Name: tc.Name, Arguments: bytes.Clone(tc.Arguments),
			ThoughtSignature: tc.ThoughtSignature, Namespace: tc.Namespace,
		}, true, nil
	}
}

// trim drops from d the characters the start snapshot already held.
func (st *encBlock) trim(d string) string {
	if st.skip == 0 {
		return d
	}
	if n := utf8.RuneCountInString(d); n <= st.skip {
		st.skip -= n
		return ""
	}
	i := 0
	for ; st.skip > 0; st.skip-- {
		_, size := utf8.DecodeRuneInString(d[i:])
		i += size
	}
	return d[i:]
}

func eventBlockType(t EventType) BlockType {
	switch t {
	case EventTextStart, EventTextDelta, EventTextEnd:
		return BlockText
	case EventThinkingStart, EventThinkingDelta, EventThinkingEnd:
		return BlockThinking
	case EventToolCallStart, EventToolCallDelta, EventToolCallEnd:
		return BlockToolCall
	}
	return ""
}

func partialBlock(m *Message, idx int) (Block, bool) {
	if m == nil || idx < 0 || idx >= len(m.Content.Blocks) {
		return Block{}, false
	}
	return m.Content.Blocks[idx], true
}

// argsPrefix returns what the buffered tool-call JSON must start with (after
// dropping insignificant whitespace) before deltas may pass through: the
// compact snapshot arguments without their closing bracket. It is "" when
// the snapshot is empty ({}, null or absent) or not valid JSON, in which
// case deltas pass through at once.
//
// Simplification: the reference waits until a partial-JSON parse of the
// buffer equals or extends the snapshot. This prefix check on the compact
// encoding approximates that; it assumes the provider streams the keys in
// the snapshot's order and in compact-equivalent form (no differing escapes).
func argsPrefix(args json.RawMessage) string {
	var buf bytes.Buffer
	if len(args) == 0 || json.Compact(&buf, args) != nil {
		return ""
	}
	s := buf.String()
	if s == "{}" || s == "null" || s == "[]" {
		return ""
	}
	if strings.HasSuffix(s, "}") || strings.HasSuffix(s, "]") {
		s = s[:len(s)-1]
	}
	return s
}

// stripJSONSpace drops whitespace outside strings from a possibly
// incomplete JSON text.
func stripJSONSpace(b []byte) string {
	var sb strings.Builder
	inStr, esc := false, false
	for _, c := range b {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

func copyBlock(b Block) Block {
	b.Arguments = bytes.Clone(b.Arguments)
	return b
}

// copyMessage deep-copies the parts of m a live partial may change.
func copyMessage(m *Message) *Message {
	c := *m
	if m.Content.Blocks != nil {
		c.Content.Blocks = make([]Block, len(m.Content.Blocks))
		for i, b := range m.Content.Blocks {
			c.Content.Blocks[i] = copyBlock(b)
		}
	}
	if m.Usage != nil {
		u := *m.Usage
		c.Usage = &u
	}
	if m.Deferred != nil {
		d := *m.Deferred
		d.Data = bytes.Clone(d.Data)
		c.Deferred = &d
	}
	if m.EndTurn != nil {
		c.EndTurn = Bool(*m.EndTurn)
	}
	c.Diagnostics = bytes.Clone(m.Diagnostics)
	return &c
}

// ReduceFrames rebuilds the assistant message the frames describe. It
// returns nil when there is no start frame. The result keeps stopReason
// pending: done and error produce no frames.
//
// Unfinished tool calls (no toolcall_end) take their arguments from the
// JSON buffer (checkpoint plus later deltas) when it is valid JSON, keep
// the start arguments when no delta or checkpoint arrived, and get {}
// otherwise. Simplification: the reference parses an incomplete buffer
// partially; here an incomplete buffer gives {}.
func ReduceFrames(frames []Frame) (*Message, error) {
	var m *Message
	type toolState struct {
		buf   []byte
		seen  bool
		ended bool
	}
	tools := map[int]*toolState{}
	for i, f := range frames {
		if f.Type == FrameStart {
			if m != nil {
				return nil, fmt.Errorf("ai: reduce frames: second start frame at %d", i)
			}
			if f.Partial == nil {
				return nil, fmt.Errorf("ai: reduce frames: start frame at %d without partial", i)
			}
			m = copyMessage(f.Partial)
			m.Content = Content{Blocks: []Block{}}
			m.StopReason = StopPending
			continue
		}
		if m == nil {
			return nil, fmt.Errorf("ai: reduce frames: %s frame at %d before start", f.Type, i)
		}
		idx := f.ContentIndex
		switch f.Type {
		case FrameTextStart, FrameThinkingStart, FrameToolCallStart:
			if idx != len(m.Content.Blocks) {
				return nil, fmt.Errorf("ai: reduce frames: %s at index %d; want %d", f.Type, idx, len(m.Content.Blocks))
			}
			var b Block
			switch {
			case f.Type == FrameToolCallStart && f.ToolCall != nil:
				b = copyBlock(*f.ToolCall)
			case f.Type != FrameToolCallStart && f.Content != nil:
				b = copyBlock(*f.Content)
			}
			b.Type = frameBlockType(f.Type)
			m.Content.Blocks = append(m.Content.Blocks, b)
			if b.Type == BlockToolCall {
				tools[idx] = &toolState{}
			}
			continue
		}
		typ := frameBlockType(f.Type)
		if typ == "" {
			return nil, fmt.Errorf("ai: reduce frames: unknown frame type %q at %d", f.Type, i)
		}
		if idx < 0 || idx >= len(m.Content.Blocks) {
			return nil, fmt.Errorf("ai: reduce frames: %s frame at %d for block %d, which has not started", f.Type, i, idx)
		}
		b := &m.Content.Blocks[idx]
		if b.Type != typ {
			return nil, fmt.Errorf("ai: reduce frames: %s frame at %d for a %s block", f.Type, i, b.Type)
		}
		switch f.Type {
		case FrameTextDelta:
			b.Text += f.Delta
		case FrameThinkingDelta:
			b.Thinking += f.Delta
		case FrameTextEnd:
			b.Text, b.TextSignature = f.EndContent, f.TextSignature
		case FrameThinkingEnd:
			b.Thinking, b.ThinkingSignature, b.Redacted = f.EndContent, f.ThinkingSignature, f.Redacted
		case FrameToolCallCheckpoint:
			ts := tools[idx]
			ts.buf, ts.seen = []byte(f.JSON), true
		case FrameToolCallDelta:
			ts := tools[idx]
			ts.buf, ts.seen = append(ts.buf, f.Delta...), true
		case FrameToolCallEnd:
			tools[idx].ended = !plant.On("reduce-call-keeps-streamed-arguments")
			*b = Block{
				Type: BlockToolCall, ID: f.ID, Name: f.Name, Arguments: bytes.Clone(f.Arguments),
				ThoughtSignature: f.ThoughtSignature, Namespace: f.Namespace,
			}
		}
	}
	if m == nil {
		return nil, nil
	}
	for idx, ts := range tools {
		if ts.ended || !ts.seen {
			continue
		}
		b := &m.Content.Blocks[idx]
		if jsonvalue.Valid(ts.buf) {
			b.Arguments = json.RawMessage(ts.buf)
		} else {
			b.Arguments = json.RawMessage(`{}`)
		}
	}
	return m, nil
}

func frameBlockType(t FrameType) BlockType {
	switch t {
	case FrameTextStart, FrameTextDelta, FrameTextEnd:
		return BlockText
	case FrameThinkingStart, FrameThinkingDelta, FrameThinkingEnd:
		return BlockThinking
	case FrameToolCallStart, FrameToolCallCheckpoint, FrameToolCallDelta, FrameToolCallEnd:
		return BlockToolCall
	}
	return ""
}
