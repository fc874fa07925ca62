package ai

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/pico-go/pico/internal/jsonvalue"
)

// Role discriminates the message family.
type Role string

const (
	RoleUser       Role = "user"
	RoleAssistant  Role = "assistant"
	RoleToolResult Role = "toolResult"
	RoleSystem     Role = "system"
)

// StopReason says how an assistant message ended.
type StopReason string

const (
	StopPending  StopReason = "pending"
	StopStop     StopReason = "stop"
	StopLength   StopReason = "length"
	StopToolUse  StopReason = "toolUse"
	StopError    StopReason = "error"
	StopAborted  StopReason = "aborted"
	StopDeferred StopReason = "deferred"
)

// Valid reports whether r is one of the known stop reasons.
func (r StopReason) Valid() bool {
	switch r {
	case StopPending, StopStop, StopLength, StopToolUse, StopError, StopAborted, StopDeferred:
		return true
	}
	return false
}

// BlockType discriminates content blocks.
type BlockType string

const (
	BlockText     BlockType = "text"
	BlockThinking BlockType = "thinking"
	BlockImage    BlockType = "image"
	BlockToolCall BlockType = "toolCall"
)

// Block is one content block. Type selects which fields are meaningful:
// text (Text, TextSignature), thinking (Thinking, ThinkingSignature,
// Redacted), image (Data, MimeType), toolCall (ID, Name, Arguments,
// ThoughtSignature, Namespace).
type Block struct {
	Type              BlockType       `json:"type"`
	Text              string          `json:"text,omitempty"`
	TextSignature     string          `json:"textSignature,omitempty"`
	Thinking          string          `json:"thinking,omitempty"`
	ThinkingSignature string          `json:"thinkingSignature,omitempty"`
	Redacted          bool            `json:"redacted,omitempty"`
	Data              string          `json:"data,omitempty"`
	MimeType          string          `json:"mimeType,omitempty"`
	ID                string          `json:"id,omitempty"`
	Name              string          `json:"name,omitempty"`
	Arguments         json.RawMessage `json:"arguments,omitempty"`
	ThoughtSignature  string          `json:"thoughtSignature,omitempty"`
	Namespace         string          `json:"namespace,omitempty"`
}

// Text returns a text block.
func Text(s string) Block { return Block{Type: BlockText, Text: s} }

// ToolCall returns a tool-call block; args must be a JSON object.
func ToolCall(id, name string, args json.RawMessage) Block {
	return Block{Type: BlockToolCall, ID: id, Name: name, Arguments: args}
}

// MarshalJSON writes the block. Text and thinking blocks always carry their
// text field, even when empty, and a tool call always carries its arguments
// object, as the reference shapes do.
func (b Block) MarshalJSON() ([]byte, error) { return jsonvalue.Appended(b.AppendJSON) }

// AppendJSON appends what MarshalJSON writes to buf: by hand, but for
// arguments encoding/json would rewrite (jsonvalue.AppendRaw), which go
// through encoding/json with the rest of the block.
func (b Block) AppendJSON(buf []byte) ([]byte, error) {
	if out, ok := b.appendPlain(buf); ok {
		return out, nil
	}
	raw, err := b.marshalReflect()
	return append(buf, raw...), err
}

// appendPlain writes the block as marshalReflect does, or reports false,
// appending nothing.
func (b Block) appendPlain(buf []byte) ([]byte, bool) {
	start := len(buf)
	buf = append(buf, `{"type":`...)
	buf = jsonvalue.AppendString(buf, string(b.Type))
	switch {
	case b.Type == BlockText && b.Text == "":
		buf = append(buf, `,"text":""`...)
	case b.Type == BlockThinking && b.Thinking == "":
		buf = append(buf, `,"thinking":""`...)
	}
	buf = appendMember(buf, `,"text":`, b.Text)
	buf = appendMember(buf, `,"textSignature":`, b.TextSignature)
	buf = appendMember(buf, `,"thinking":`, b.Thinking)
	buf = appendMember(buf, `,"thinkingSignature":`, b.ThinkingSignature)
	if b.Redacted {
		buf = append(buf, `,"redacted":true`...)
	}
	buf = appendMember(buf, `,"data":`, b.Data)
	buf = appendMember(buf, `,"mimeType":`, b.MimeType)
	buf = appendMember(buf, `,"id":`, b.ID)
	buf = appendMember(buf, `,"name":`, b.Name)
	var ok bool
	if buf, ok = appendArguments(buf, b.Arguments, b.Type == BlockToolCall); !ok {
		return buf[:start], false
	}
	buf = appendMember(buf, `,"thoughtSignature":`, b.ThoughtSignature)
	buf = appendMember(buf, `,"namespace":`, b.Namespace)
	return append(buf, '}'), true
}

// appendArguments writes the arguments member, unless there are none and
// they are not a tool call's, whose are {} then; it reports false when
// encoding/json would rewrite them (jsonvalue.AppendRaw).
func appendArguments(buf []byte, args json.RawMessage, toolCall bool) ([]byte, bool) {
	if len(args) == 0 {
		if !toolCall {
			return buf, true
		}
		args = json.RawMessage(`{}`)
	}
	return jsonvalue.AppendRaw(append(buf, `,"arguments":`...), args)
}

// appendMember writes a string member, key with its leading comma, unless
// v is empty (omitempty).
func appendMember(buf []byte, key, v string) []byte {
	if v == "" {
		return buf
	}
	return jsonvalue.AppendString(append(buf, key...), v)
}

// marshalReflect writes the block with encoding/json.
func (b Block) marshalReflect() ([]byte, error) {
	type plain Block
	if b.Type == BlockToolCall && len(b.Arguments) == 0 {
		// Set on the copy rather than spliced in afterwards, so "arguments"
		// keeps its place after "name": the bytes then equal what decoding
		// and re-encoding them gives.
		b.Arguments = json.RawMessage(`{}`)
	}
	out, err := json.Marshal(plain(b))
	if err != nil {
		return nil, err
	}
	switch {
	case b.Type == BlockText && b.Text == "":
		return insertField(out, `"text":""`), nil
	case b.Type == BlockThinking && b.Thinking == "":
		return insertField(out, `"thinking":""`), nil
	}
	return out, nil
}

// insertField adds a field right after the leading {"type":…} member. In a
// well-formed text or thinking block that is where the text field belongs:
// no field declared before it is set.
func insertField(obj []byte, field string) []byte {
	i := bytes.IndexByte(obj[1:], ',') + 1
	if i == 0 { // only the type field
		i = len(obj) - 1
	}
	var buf bytes.Buffer
	buf.Write(obj[:i])
	buf.WriteByte(',')
	buf.WriteString(field)
	buf.Write(obj[i:])
	return buf.Bytes()
}

// UnmarshalJSON reads a block and rejects an unknown type.
func (b *Block) UnmarshalJSON(data []byte) error {
	if fastPaths {
		if fast, ok := decodeBlock(data); ok {
			if jsonvalue.Checking() {
				slow, err := unmarshalBlock(data)
				if err := jsonvalue.Differ("ai.Block", data, fast, slow, err); err != nil {
					return err // a replay may parse on a goroutine of its own: never panic there
				}
			}
			*b = fast
			return nil
		}
	}
	slow, err := unmarshalBlock(data)
	if err != nil {
		return err
	}
	*b = slow
	return nil
}

// unmarshalBlock decodes a block with encoding/json: what the fast path
// gives up on, and what it is tested against.
func unmarshalBlock(data []byte) (Block, error) {
	type plain Block
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return Block{}, err
	}
	if err := Block(p).check(); err != nil {
		return Block{}, err
	}
	return Block(p), nil
}

// check holds a decoded block to a known type, and a tool call to an id.
func (b Block) check() error {
	switch b.Type {
	case BlockText, BlockThinking, BlockImage, BlockToolCall:
	default:
		return fmt.Errorf("ai: unknown content block type %q", b.Type)
	}
	if b.Type == BlockToolCall && b.ID == "" {
		return fmt.Errorf("ai: toolCall block without id")
	}
	return nil
}

// Content is a message body. The reference allows user and system content to
// be a bare string; Plain records that form so JSON round-trips unchanged.
// A plain content holds exactly one text block.
type Content struct {
	Blocks []Block
	Plain  bool
}

// PlainText returns content written as a bare JSON string.
func PlainText(s string) Content { return Content{Blocks: []Block{Text(s)}, Plain: true} }

// Blocks returns content written as a JSON array.
func Blocks(bs ...Block) Content { return Content{Blocks: bs} }

// MarshalJSON writes a bare string for plain content, else the block array.
// A text block with a signature is written as an array even when Plain is
// set, because a bare string would drop the signature.
func (c Content) MarshalJSON() ([]byte, error) {
	if c.Plain && len(c.Blocks) == 1 && c.Blocks[0].Type == BlockText && c.Blocks[0].TextSignature == "" {
		return json.Marshal(c.Blocks[0].Text)
	}
	if c.Blocks == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(c.Blocks)
}

// UnmarshalJSON accepts a string or an array of blocks.
func (c *Content) UnmarshalJSON(data []byte) error {
	d := jsonvalue.NewDecoder(data)
	if fast := (Content{}); fastPaths && readContent(d, &fast) && d.End() {
		if jsonvalue.Checking() {
			slow, err := unmarshalContent(data)
			if err := jsonvalue.Differ("ai.Content", data, fast, slow, err); err != nil {
				return err // a replay may parse on a goroutine of its own: never panic there
			}
		}
		*c = fast
		return nil
	}
	slow, err := unmarshalContent(data)
	if err != nil {
		return err
	}
	*c = slow
	return nil
}

// unmarshalContent decodes a content with encoding/json: what the fast
// path gives up on, and what it is tested against.
func unmarshalContent(data []byte) (Content, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return Content{}, err
		}
		return PlainText(s), nil
	}
	var bs []Block
	if err := json.Unmarshal(data, &bs); err != nil {
		return Content{}, err
	}
	if bs == nil {
		bs = []Block{}
	}
	return Content{Blocks: bs}, nil
}

// TextOf concatenates the text blocks of c.
func (c Content) TextOf() string {
	var s string
	for _, b := range c.Blocks {
		if b.Type == BlockText {
			s += b.Text
		}
	}
	return s
}

// Cost is the money side of usage.
type Cost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
	Total      float64 `json:"total"`
}

// Usage is what one model call consumed. Reasoning is counted inside Output
// and CacheWrite1h inside CacheWrite.
type Usage struct {
	Input        int64 `json:"input"`
	Output       int64 `json:"output"`
	CacheRead    int64 `json:"cacheRead"`
	CacheWrite   int64 `json:"cacheWrite"`
	CacheWrite1h int64 `json:"cacheWrite1h,omitempty"`
	Reasoning    int64 `json:"reasoning,omitempty"`
	TotalTokens  int64 `json:"totalTokens"`
	Cost         Cost  `json:"cost"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Input: u.Input + v.Input, Output: u.Output + v.Output,
		CacheRead: u.CacheRead + v.CacheRead, CacheWrite: u.CacheWrite + v.CacheWrite,
		CacheWrite1h: u.CacheWrite1h + v.CacheWrite1h, Reasoning: u.Reasoning + v.Reasoning,
		TotalTokens: u.TotalTokens + v.TotalTokens,
		Cost: Cost{
			Input: u.Cost.Input + v.Cost.Input, Output: u.Cost.Output + v.Cost.Output,
			CacheRead: u.Cost.CacheRead + v.Cost.CacheRead, CacheWrite: u.Cost.CacheWrite + v.Cost.CacheWrite,
			Total: u.Cost.Total + v.Cost.Total,
		},
	}
}

// Tool is a tool definition as sent to a model. Parameters is a JSON Schema.
type Tool struct {
	Name                string          `json:"name"`
	Description         string          `json:"description"`
	Parameters          json.RawMessage `json:"parameters"`
	ConstrainedSampling json.RawMessage `json:"constrainedSampling,omitempty"`
}

// ToolRef names a tool, as a system message's toolsRemoved does.
type ToolRef struct {
	Name string `json:"name"`
}

// Deferred is the handle of a response the provider will finish later.
type Deferred struct {
	Provider    string          `json:"provider"`
	ModelID     string          `json:"modelId"`
	API         string          `json:"api"`
	ID          string          `json:"id"`
	ExpiresAt   int64           `json:"expiresAt,omitempty"`
	PollAfterMs int64           `json:"pollAfterMs,omitempty"`
	Data        json.RawMessage `json:"data,omitempty"`
}

// NestedCall is one call a tool made on the model's behalf.
type NestedCall struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments,omitempty"`
	ArgumentsBytes int64           `json:"argumentsBytes,omitempty"`
	Status         string          `json:"status"`
	DurationMs     int64           `json:"durationMs,omitempty"`
	Error          string          `json:"error,omitempty"`
}

// NestedCalls lists a tool result's nested calls.
type NestedCalls struct {
	Calls    []NestedCall `json:"calls"`
	Complete bool         `json:"complete"`
}

// Message is one provider-neutral message; Role selects the family and which
// fields are meaningful. The zero value of an optional field is omitted.
//
// Sections of a system message map a name to its text; a nil text deletes
// the section (JSON null).
type Message struct {
	Role    Role    `json:"role"`
	Content Content `json:"content"`

	// assistant
	API                   string          `json:"api,omitempty"`
	Provider              string          `json:"provider,omitempty"`
	Model                 string          `json:"model,omitempty"`
	Usage                 *Usage          `json:"usage,omitempty"`
	StopReason            StopReason      `json:"stopReason,omitempty"`
	ResponseModel         string          `json:"responseModel,omitempty"`
	ResponseID            string          `json:"responseId,omitempty"`
	ProviderThinkingLevel string          `json:"providerThinkingLevel,omitempty"`
	ThinkingLevel         string          `json:"thinkingLevel,omitempty"`
	Diagnostics           json.RawMessage `json:"diagnostics,omitempty"`
	Deferred              *Deferred       `json:"deferred,omitempty"`
	ErrorMessage          string          `json:"errorMessage,omitempty"`
	RawStopReason         string          `json:"rawStopReason,omitempty"`
	EndTurn               *bool           `json:"endTurn,omitempty"`

	// toolResult
	ToolCallID  string          `json:"toolCallId,omitempty"`
	ToolName    string          `json:"toolName,omitempty"`
	Details     json.RawMessage `json:"details,omitempty"`
	NestedCalls *NestedCalls    `json:"nestedCalls,omitempty"`
	IsError     *bool           `json:"isError,omitempty"`

	// system
	Sections     map[string]*string `json:"sections,omitempty"`
	ToolsAdded   []Tool             `json:"toolsAdded,omitempty"`
	ToolsRemoved []ToolRef          `json:"toolsRemoved,omitempty"`

	Timestamp  int64 `json:"timestamp"`
	DurationMs int64 `json:"durationMs,omitempty"`
}

// UnmarshalJSON reads a message and rejects an unknown role or stop reason.
func (m *Message) UnmarshalJSON(data []byte) error {
	if fastPaths {
		if fast, ok := decodeMessage(data); ok {
			if jsonvalue.Checking() {
				slow, err := unmarshalMessage(data)
				if err := jsonvalue.Differ("ai.Message", data, fast, slow, err); err != nil {
					return err // a replay may parse on a goroutine of its own: never panic there
				}
			}
			*m = fast
			return nil
		}
	}
	slow, err := unmarshalMessage(data)
	if err != nil {
		return err
	}
	*m = slow
	return nil
}

// unmarshalMessage decodes a message with encoding/json: what the fast
// path gives up on, and what it is tested against.
func unmarshalMessage(data []byte) (Message, error) {
	type plain Message
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return Message{}, err
	}
	if err := (*Message)(&p).check(); err != nil {
		return Message{}, err
	}
	return Message(p), nil
}

// check holds a decoded message to a known role and stop reason, and a
// tool result to the call it answers.
func (m *Message) check() error {
	switch m.Role {
	case RoleUser, RoleAssistant, RoleToolResult, RoleSystem:
	default:
		return fmt.Errorf("ai: unknown message role %q", m.Role)
	}
	if m.StopReason != "" && !m.StopReason.Valid() {
		return fmt.Errorf("ai: unknown stopReason %q", m.StopReason)
	}
	if m.Role == RoleToolResult && m.ToolCallID == "" {
		return fmt.Errorf("ai: toolResult message without toolCallId")
	}
	return nil
}

// UserText returns a user message whose content is a bare string.
func UserText(text string, timestamp int64) Message {
	return Message{Role: RoleUser, Content: PlainText(text), Timestamp: timestamp}
}

// ToolCalls returns the tool-call blocks of an assistant message in call order.
func (m Message) ToolCalls() []Block {
	var calls []Block
	for _, b := range m.Content.Blocks {
		if b.Type == BlockToolCall {
			calls = append(calls, b)
		}
	}
	return calls
}

// Bool returns a pointer to v, for the optional boolean fields.
func Bool(v bool) *bool { return &v }
