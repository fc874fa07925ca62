package agent

import (
	"encoding/json"
	"strconv"

	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// The fast paths of decoding what every turn decodes (core.JSONDecoder):
// a generation's state (each attempt), a tool call's (its start and its
// settlement), a post_tools' (its start), what it reads of each settled
// call (its outcome), and an input's result. Each reads the shapes this
// package writes by hand and gives up (false) on anything else: a key
// given twice, a key matching a field only without regard to case, a value
// of another kind, a field it leaves to encoding/json (a deferred handle, a
// job, a tool state's output). core.Unmarshal then decodes with
// encoding/json, so that what a text means, and the error it gets, is
// decided in one place. The tests hold the two to the same results on
// every text a fast path takes.

// fastStates is cleared only by this package's tests, to decode with
// encoding/json alone: the reference the fast paths are held to.
var fastStates = true

// fastReader is a value with a fast path: read reads it from d.
type fastReader interface {
	read(d *jsonvalue.Decoder) bool
}

// decodeWith is a DecodeJSON: r reads data whole.
func decodeWith(data []byte, r fastReader) bool {
	if !fastStates {
		return false
	}
	d := jsonvalue.NewDecoder(data)
	return r.read(d) && d.End()
}

// The keys each fast path reads, in the order its read numbers them; the
// tests hold each list to its type's JSON fields, so that a field added to
// a state is not skipped by its fast path. (A field added must be written
// by the type's AppendJSON too.)
var (
	generationKeys = []string{"inputs", "config", "attempt", "maxAttempts", "notBefore", "deferred",
		"afterCollapse", "overflowRetried", "assistant", "reason", "collapse"}
	generationConfigKeys = []string{"model", "thinking", "selectedTools", "profile", "budgetMs"}
	modelRefKeys         = []string{"provider", "modelId"}
	toolKeys             = []string{"call", "assistant", "offered", "budgetMs", "args", "replay", "limits", "job", "output", "result"}
	outputLimitsKeys     = []string{"maxBytes", "maxLines", "retain"}
	postToolsKeys        = []string{"assistant", "tools", "inputs", "stopped", "reason"}
	outcomeViewKeys      = []string{"output"}
	outcomeKeys          = []string{"addedTools", "terminate", "handoff"}
	inputResultKeys      = []string{"status", "requestId", "placementEntryId", "resultEntryId", "reason"}

	generationFields       = jsonvalue.SomeFields(generationKeys...)
	generationConfigFields = jsonvalue.SomeFields(generationConfigKeys...)
	modelRefFields         = jsonvalue.SomeFields(modelRefKeys...)
	toolFields             = jsonvalue.SomeFields(toolKeys...)
	outputLimitsFields     = jsonvalue.SomeFields(outputLimitsKeys...)
	postToolsFields        = jsonvalue.SomeFields(postToolsKeys...)
	outcomeViewFields      = jsonvalue.SomeFields(outcomeViewKeys...)
	outcomeFields          = jsonvalue.SomeFields(outcomeKeys...)
	inputResultFields      = jsonvalue.SomeFields(inputResultKeys...)
)

// DecodeJSON reads a generation state this package writes into the zero
// value it is called on (core.JSONDecoder).
func (s *GenerationState) DecodeJSON(data []byte) bool { return decodeWith(data, s) }

func (s *GenerationState) read(d *jsonvalue.Decoder) bool {
	return d.Members(generationFields, func(i int) bool {
		switch i {
		case 0:
			return idsInto(d, &s.Inputs)
		case 1:
			return structInto(d, func() bool { return s.Config.read(d) })
		case 2:
			return intInto(d, &s.Attempt)
		case 3:
			return intInto(d, &s.MaxAttempts)
		case 4:
			return jsonvalue.Int64Into(d, &s.NotBefore)
		case 5:
			return d.Null() // a handle is encoding/json's
		case 6:
			return jsonvalue.Int64Into(d, &s.AfterCollapse)
		case 7:
			return jsonvalue.BoolInto(d, &s.OverflowRetried)
		case 8:
			return jsonvalue.Int64Into(d, &s.Assistant)
		case 9:
			return jsonvalue.StringInto(d, &s.Reason)
		}
		return jsonvalue.Int64Into(d, &s.Collapse)
	})
}

func (c *GenerationConfig) read(d *jsonvalue.Decoder) bool {
	return d.Members(generationConfigFields, func(i int) bool {
		switch i {
		case 0:
			return structInto(d, func() bool {
				return d.Members(modelRefFields, func(i int) bool {
					if i == 0 {
						return jsonvalue.StringInto(d, &c.Model.Provider)
					}
					return jsonvalue.StringInto(d, &c.Model.ModelID)
				})
			})
		case 1:
			return jsonvalue.StringInto(d, &c.Thinking)
		case 2:
			return jsonvalue.SliceInto(d, &c.SelectedTools, func(n *string) bool { return jsonvalue.StringInto(d, n) })
		case 3:
			return jsonvalue.StringInto(d, &c.Profile)
		}
		return jsonvalue.Int64Into(d, &c.BudgetMs)
	})
}

// DecodeJSON reads a tool state this package writes into the zero
// value it is called on (core.JSONDecoder).
func (s *ToolState) DecodeJSON(data []byte) bool { return decodeWith(data, s) }

func (s *ToolState) read(d *jsonvalue.Decoder) bool {
	return d.Members(toolFields, func(i int) bool {
		switch i {
		case 0:
			// What encoding/json does with a field that has UnmarshalJSON,
			// null included: hand it the value's text.
			raw, ok := d.Value()
			return ok && s.Call.UnmarshalJSON(raw) == nil
		case 1:
			return jsonvalue.Int64Into(d, &s.Assistant)
		case 2:
			return jsonvalue.BoolInto(d, &s.Offered)
		case 3:
			return jsonvalue.Int64Into(d, &s.BudgetMs)
		case 4:
			return jsonvalue.RawInto(d, &s.Args)
		case 5:
			return jsonvalue.StringInto(d, &s.Replay)
		case 6:
			return structInto(d, func() bool {
				return d.Members(outputLimitsFields, func(i int) bool {
					switch i {
					case 0:
						return intInto(d, &s.Limits.MaxBytes)
					case 1:
						return intInto(d, &s.Limits.MaxLines)
					}
					if plant.On("tool-limits-retain-unread") {
						var skip string
						return jsonvalue.StringInto(d, &skip)
					}
					return jsonvalue.StringInto(d, &s.Limits.Retain)
				})
			})
		case 7, 8:
			return d.Null() // a job or an output is encoding/json's
		}
		return jsonvalue.Int64Into(d, &s.Result)
	})
}

// DecodeJSON reads a post_tools state this package writes into the zero
// value it is called on (core.JSONDecoder).
func (s *PostToolsState) DecodeJSON(data []byte) bool { return decodeWith(data, s) }

func (s *PostToolsState) read(d *jsonvalue.Decoder) bool {
	return d.Members(postToolsFields, func(i int) bool {
		switch i {
		case 0:
			return jsonvalue.Int64Into(d, &s.Assistant)
		case 1:
			return idsInto(d, &s.Tools)
		case 2:
			return idsInto(d, &s.Inputs)
		case 3:
			return jsonvalue.BoolInto(d, &s.Stopped)
		}
		return jsonvalue.StringInto(d, &s.Reason)
	})
}

// DecodeJSON reads what post_tools acts on of a tool state this package
// writes into the zero value it is called on (core.JSONDecoder).
func (v *toolOutcomeView) DecodeJSON(data []byte) bool { return decodeWith(data, v) }

func (v *toolOutcomeView) read(d *jsonvalue.Decoder) bool {
	return d.Members(outcomeViewFields, func(int) bool {
		return jsonvalue.PointerInto(d, &v.Output, func(o *toolOutcome) bool {
			return d.Members(outcomeFields, func(i int) bool {
				switch i {
				case 0:
					return jsonvalue.SliceInto(d, &o.AddedTools, func(n *string) bool { return jsonvalue.StringInto(d, n) })
				case 1:
					return jsonvalue.BoolInto(d, &o.Terminate)
				}
				return jsonvalue.StringInto(d, &o.Handoff)
			})
		})
	})
}

// DecodeJSON reads an input result this package writes into the zero
// value it is called on (core.JSONDecoder).
func (r *InputResult) DecodeJSON(data []byte) bool { return decodeWith(data, r) }

func (r *InputResult) read(d *jsonvalue.Decoder) bool {
	return d.Members(inputResultFields, func(i int) bool {
		switch i {
		case 0:
			return jsonvalue.StringInto(d, &r.Status)
		case 1:
			return jsonvalue.StringInto(d, &r.RequestID)
		case 2:
			return jsonvalue.Int64Into(d, &r.PlacementEntryID)
		case 3:
			return jsonvalue.Int64Into(d, &r.ResultEntryID)
		}
		return jsonvalue.StringInto(d, &r.Reason)
	})
}

// structInto reads an object into a struct field by read; null leaves the
// field as it is, as encoding/json does.
func structInto(d *jsonvalue.Decoder, read func() bool) bool {
	return d.Null() || read()
}

// intInto reads an integer into an int field; one the platform's int
// cannot hold gives up, as encoding/json refuses it.
func intInto(d *jsonvalue.Decoder, n *int) bool {
	v := int64(*n)
	ok := jsonvalue.Int64Into(d, &v)
	*n = int(v)
	return ok && int64(int(v)) == v
}

// idsInto reads an array of ids.
func idsInto(d *jsonvalue.Decoder, ids *[]storage.ID) bool {
	return jsonvalue.SliceInto(d, ids, func(id *storage.ID) bool { return jsonvalue.Int64Into(d, id) })
}

// The hand-written encodings (core.JSONAppender) of what a tool call's
// settlement writes: its result entry's data and its output in its state.
// Each writes json.Marshal's bytes, and leaves to it (value and error)
// anything a part of it would not write by hand: details encoding/json
// rewrites, a cost it refuses, a block it writes through reflection.

// AppendJSON appends what json.Marshal writes of the data to buf
// (core.JSONAppender).
func (r ToolResultData) AppendJSON(buf []byte) ([]byte, error) {
	return appendOr(buf, r, func(buf []byte) ([]byte, bool) {
		return r.appendMembers(append(buf, '{'), true)
	})
}

// AppendJSON appends what json.Marshal writes of the output state to buf
// (core.JSONAppender).
func (s ToolOutputState) AppendJSON(buf []byte) ([]byte, error) {
	return appendOr(buf, s, s.appendPlain)
}

func (s ToolOutputState) appendPlain(buf []byte) ([]byte, bool) {
	buf = append(buf, `{"content":`...)
	if s.Content == nil {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, '[')
		for i, b := range s.Content {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = b.AppendJSON(buf); err != nil {
				return buf, false
			}
		}
		buf = append(buf, ']')
	}
	return s.ToolResultData.appendMembers(buf, false)
}

// appendMembers writes the data's members, the first of the object when
// first is set, and closes the object.
func (r ToolResultData) appendMembers(buf []byte, first bool) ([]byte, bool) {
	sep := func(key string) {
		if first {
			first = false
		} else {
			buf = append(buf, ',')
		}
		buf = append(buf, key...)
	}
	ok := true
	if len(r.Details) > 0 {
		sep(`"details":`)
		buf, ok = jsonvalue.AppendRaw(buf, r.Details)
	}
	if r.Usage != nil && ok {
		sep(`"usage":`)
		var err error
		buf, err = r.Usage.AppendJSON(buf)
		ok = err == nil
	}
	if len(r.AddedTools) > 0 {
		sep(`"addedTools":`)
		buf = appendStrings(buf, r.AddedTools)
	}
	sep(`"terminate":`)
	buf = strconv.AppendBool(buf, r.Terminate)
	if r.Handoff != "" {
		sep(`"handoff":`)
		buf = jsonvalue.AppendString(buf, r.Handoff)
	}
	if r.Delegated != 0 {
		sep(`"delegated":`)
		buf = strconv.AppendInt(buf, int64(r.Delegated), 10)
	}
	sep(`"diags":`)
	if r.Diags == nil {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, '[')
		for i, d := range r.Diags {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = d.appendJSON(buf)
		}
		buf = append(buf, ']')
	}
	sep(`"truncation":`)
	buf = r.Truncation.appendJSON(buf)
	sep(`"isError":`)
	buf = strconv.AppendBool(buf, r.IsError)
	return append(buf, '}'), ok
}

// toolSettlement is what a call's settlement merges into its state: the
// members of the map it was, in the order json.Marshal writes a map's
// (its keys sorted), so the state's bytes are as they were.
type toolSettlement struct {
	Job    *ToolJob        `json:"job,omitempty"`
	Output ToolOutputState `json:"output"`
	Result storage.ID      `json:"result"`
}

// AppendJSON appends what json.Marshal writes of the settlement to buf
// (core.JSONAppender).
func (s toolSettlement) AppendJSON(buf []byte) ([]byte, error) {
	return appendOr(buf, s, func(buf []byte) ([]byte, bool) {
		buf = append(buf, '{')
		if s.Job != nil {
			return buf, false // rare: encoding/json's
		}
		buf, ok := s.Output.appendPlain(append(buf, `"output":`...))
		buf = strconv.AppendInt(append(buf, `,"result":`...), int64(s.Result), 10)
		return append(buf, '}'), ok
	})
}

// appendOr appends what plain writes of v, or, when it reports false,
// what json.Marshal writes of v, error and all.
func appendOr(buf []byte, v any, plain func([]byte) ([]byte, bool)) ([]byte, error) {
	start := len(buf)
	if out, ok := plain(buf); ok {
		return out, nil
	}
	raw, err := json.Marshal(v)
	return append(buf[:start], raw...), err
}

func (d Diag) appendJSON(buf []byte) []byte {
	buf = jsonvalue.AppendString(append(buf, `{"severity":`...), d.Severity)
	buf = jsonvalue.AppendString(append(buf, `,"message":`...), d.Message)
	if d.Code != "" {
		buf = jsonvalue.AppendString(append(buf, `,"code":`...), d.Code)
	}
	return append(buf, '}')
}

func (t Truncation) appendJSON(buf []byte) []byte {
	buf = strconv.AppendBool(append(buf, `{"truncated":`...), t.Truncated)
	buf = strconv.AppendInt(append(buf, `,"totalLines":`...), int64(t.TotalLines), 10)
	buf = strconv.AppendInt(append(buf, `,"totalBytes":`...), int64(t.TotalBytes), 10)
	buf = strconv.AppendInt(append(buf, `,"shownLines":`...), int64(t.ShownLines), 10)
	buf = strconv.AppendInt(append(buf, `,"shownBytes":`...), int64(t.ShownBytes), 10)
	if t.SpillPath != "" {
		buf = jsonvalue.AppendString(append(buf, `,"spillPath":`...), t.SpillPath)
	}
	return append(buf, '}')
}

// appendStrings writes an array of strings; nil is null.
func appendStrings(buf []byte, ss []string) []byte {
	if ss == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '[')
	for i, s := range ss {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = jsonvalue.AppendString(buf, s)
	}
	return append(buf, ']')
}

// appendIDs writes an array of ids; nil is null.
func appendIDs(buf []byte, ids []storage.ID) []byte {
	if ids == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '[')
	for i, id := range ids {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, int64(id), 10)
	}
	return append(buf, ']')
}

// The hand-written encodings (core.JSONAppender) of the states and rows
// every turn writes: a generation's, a tool call's and a post_tools'
// states at their creation and settlement, an input's result, a usage
// row, a sink operation, and the patches a generation and a tool call
// merge into their states as they start. Each writes json.Marshal's
// bytes, and leaves to it what a part would not write by hand (a deferred
// handle, arguments encoding/json rewrites).

// omitted writes ,"key":n unless n is 0, as omitempty does.
func omitted(buf []byte, key string, n int64) []byte {
	if n == 0 {
		return buf
	}
	return strconv.AppendInt(append(buf, key...), n, 10)
}

// omittedString writes ,"key":s unless s is empty, as omitempty does.
func omittedString(buf []byte, key, s string) []byte {
	if s == "" {
		return buf
	}
	return jsonvalue.AppendString(append(buf, key...), s)
}

// AppendJSON appends what json.Marshal writes of the state to buf
// (core.JSONAppender).
func (s GenerationState) AppendJSON(buf []byte) ([]byte, error) {
	return appendOr(buf, s, func(buf []byte) ([]byte, bool) {
		if s.Deferred != nil {
			return buf, false // rare: encoding/json's
		}
		buf = appendIDs(append(buf, `{"inputs":`...), s.Inputs)
		buf = s.Config.appendJSON(append(buf, `,"config":`...))
		buf = strconv.AppendInt(append(buf, `,"attempt":`...), int64(s.Attempt), 10)
		buf = strconv.AppendInt(append(buf, `,"maxAttempts":`...), int64(s.MaxAttempts), 10)
		buf = omitted(buf, `,"notBefore":`, s.NotBefore)
		if !plant.On("generation-after-collapse-unwritten") {
			buf = omitted(buf, `,"afterCollapse":`, int64(s.AfterCollapse))
		}
		if s.OverflowRetried {
			buf = append(buf, `,"overflowRetried":true`...)
		}
		buf = omitted(buf, `,"assistant":`, int64(s.Assistant))
		buf = omittedString(buf, `,"reason":`, s.Reason)
		buf = omitted(buf, `,"collapse":`, int64(s.Collapse))
		return append(buf, '}'), true
	})
}

func (c GenerationConfig) appendJSON(buf []byte) []byte {
	buf = append(buf, `{"model":{`...)
	if c.Model.Provider != "" {
		buf = jsonvalue.AppendString(append(buf, `"provider":`...), c.Model.Provider)
	}
	if c.Model.ModelID != "" {
		if c.Model.Provider != "" {
			buf = append(buf, ',')
		}
		buf = jsonvalue.AppendString(append(buf, `"modelId":`...), c.Model.ModelID)
	}
	buf = append(buf, '}')
	buf = omittedString(buf, `,"thinking":`, c.Thinking)
	buf = appendStrings(append(buf, `,"selectedTools":`...), c.SelectedTools)
	buf = omittedString(buf, `,"profile":`, c.Profile)
	buf = strconv.AppendInt(append(buf, `,"budgetMs":`...), c.BudgetMs, 10)
	return append(buf, '}')
}

// AppendJSON appends what json.Marshal writes of the state to buf
// (core.JSONAppender).
func (s ToolState) AppendJSON(buf []byte) ([]byte, error) {
	return appendOr(buf, s, func(buf []byte) ([]byte, bool) {
		buf, err := s.Call.AppendJSON(append(buf, `{"call":`...))
		if err != nil {
			return buf, false
		}
		buf = strconv.AppendInt(append(buf, `,"assistant":`...), int64(s.Assistant), 10)
		buf = strconv.AppendBool(append(buf, `,"offered":`...), s.Offered)
		buf = strconv.AppendInt(append(buf, `,"budgetMs":`...), s.BudgetMs, 10)
		ok := true
		if len(s.Args) > 0 {
			buf, ok = jsonvalue.AppendRaw(append(buf, `,"args":`...), s.Args)
		}
		buf = omittedString(buf, `,"replay":`, string(s.Replay))
		buf = s.Limits.appendJSON(append(buf, `,"limits":`...))
		if s.Job != nil {
			buf = strconv.AppendInt(append(buf, `,"job":{"id":`...), int64(s.Job.ID), 10)
			buf = strconv.AppendBool(append(buf, `,"cancelOnAbort":`...), s.Job.CancelOnAbort)
			if s.Job.Detached {
				buf = append(buf, `,"detached":true`...)
			}
			buf = append(buf, '}')
		}
		if s.Output != nil && ok {
			buf, ok = s.Output.appendPlain(append(buf, `,"output":`...))
		}
		buf = omitted(buf, `,"result":`, int64(s.Result))
		return append(buf, '}'), ok
	})
}

func (l OutputLimits) appendJSON(buf []byte) []byte {
	buf = append(buf, '{')
	start := len(buf)
	sep := func(key string) {
		if len(buf) > start {
			buf = append(buf, ',')
		}
		buf = append(buf, key...)
	}
	if l.MaxBytes != 0 {
		sep(`"maxBytes":`)
		buf = strconv.AppendInt(buf, int64(l.MaxBytes), 10)
	}
	if l.MaxLines != 0 {
		sep(`"maxLines":`)
		buf = strconv.AppendInt(buf, int64(l.MaxLines), 10)
	}
	if l.Retain != "" {
		sep(`"retain":`)
		buf = jsonvalue.AppendString(buf, l.Retain)
	}
	return append(buf, '}')
}

// AppendJSON appends what json.Marshal writes of the state to buf
// (core.JSONAppender).
func (s PostToolsState) AppendJSON(buf []byte) ([]byte, error) {
	buf = strconv.AppendInt(append(buf, `{"assistant":`...), int64(s.Assistant), 10)
	buf = appendIDs(append(buf, `,"tools":`...), s.Tools)
	buf = appendIDs(append(buf, `,"inputs":`...), s.Inputs)
	if s.Stopped {
		buf = append(buf, `,"stopped":true`...)
	}
	buf = omittedString(buf, `,"reason":`, s.Reason)
	return append(buf, '}'), nil
}

// AppendJSON appends what json.Marshal writes of the result to buf
// (core.JSONAppender).
func (r InputResult) AppendJSON(buf []byte) ([]byte, error) {
	buf = jsonvalue.AppendString(append(buf, `{"status":`...), string(r.Status))
	buf = omittedString(buf, `,"requestId":`, r.RequestID)
	buf = omitted(buf, `,"placementEntryId":`, int64(r.PlacementEntryID))
	buf = omitted(buf, `,"resultEntryId":`, int64(r.ResultEntryID))
	buf = omittedString(buf, `,"reason":`, r.Reason)
	return append(buf, '}'), nil
}

// AppendJSON appends what json.Marshal writes of the row to buf
// (core.JSONAppender).
func (r UsageRow) AppendJSON(buf []byte) ([]byte, error) {
	return appendOr(buf, r, func(buf []byte) ([]byte, bool) {
		buf = strconv.AppendInt(append(buf, `{"conversationId":`...), int64(r.ConversationID), 10)
		buf = strconv.AppendInt(append(buf, `,"taskId":`...), int64(r.TaskID), 10)
		buf = jsonvalue.AppendString(append(buf, `,"kind":`...), r.Kind)
		buf = omittedString(buf, `,"model":`, r.Model)
		buf = strconv.AppendInt(append(buf, `,"attempt":`...), int64(r.Attempt), 10)
		buf = jsonvalue.AppendString(append(buf, `,"outcome":`...), r.Outcome)
		if r.Usage != nil {
			var err error
			if buf, err = r.Usage.AppendJSON(append(buf, `,"usage":`...)); err != nil {
				return buf, false
			}
		}
		return append(buf, '}'), true
	})
}

// AppendJSON appends what json.Marshal writes of the operation to buf
// (core.JSONAppender).
func (o SinkOp) AppendJSON(buf []byte) ([]byte, error) {
	return appendOr(buf, o, func(buf []byte) ([]byte, bool) {
		buf = jsonvalue.AppendString(append(buf, `{"op":`...), o.Op)
		buf = omittedString(buf, `,"text":`, o.Text)
		var err error
		if o.Image != nil {
			if buf, err = o.Image.AppendJSON(append(buf, `,"image":`...)); err != nil {
				return buf, false
			}
		}
		if o.Truncation != nil {
			buf = o.Truncation.appendJSON(append(buf, `,"truncation":`...))
		}
		if o.Usage != nil {
			if buf, err = o.Usage.AppendJSON(append(buf, `,"usage":`...)); err != nil {
				return buf, false
			}
		}
		if len(o.Names) > 0 {
			buf = appendStrings(append(buf, `,"names":`...), o.Names)
		}
		if o.Value {
			buf = append(buf, `,"value":true`...)
		}
		buf = omitted(buf, `,"job":`, int64(o.Job))
		if o.Diag != nil {
			buf = o.Diag.appendJSON(append(buf, `,"diag":`...))
		}
		return append(buf, '}'), true
	})
}

// attemptStart is what a generation or a collapse merges into its state
// as an attempt starts: the members of the map it was, in the order
// json.Marshal writes a map's (its keys sorted), so the state's bytes are
// as they were.
type attemptStart struct {
	Attempt   int   `json:"attempt"`
	NotBefore int64 `json:"notBefore"`
}

// AppendJSON appends what json.Marshal writes of the patch to buf
// (core.JSONAppender).
func (p attemptStart) AppendJSON(buf []byte) ([]byte, error) {
	buf = strconv.AppendInt(append(buf, `{"attempt":`...), int64(p.Attempt), 10)
	buf = strconv.AppendInt(append(buf, `,"notBefore":`...), p.NotBefore, 10)
	return append(buf, '}'), nil
}

// answeredWith is what a generation merges into its state as it settles with
// its assistant entry (the map it was, as attemptStart).
type answeredWith struct {
	Assistant storage.ID `json:"assistant"`
}

// AppendJSON appends what json.Marshal writes of the settlement to buf
// (core.JSONAppender).
func (p answeredWith) AppendJSON(buf []byte) ([]byte, error) {
	buf = strconv.AppendInt(append(buf, `{"assistant":`...), int64(p.Assistant), 10)
	return append(buf, '}'), nil
}

// toolStart is what a tool call merges into its state as it starts to
// run (the map it was, as attemptStart): args always, null when none.
type toolStart struct {
	Args   json.RawMessage `json:"args"`
	Limits OutputLimits    `json:"limits"`
	Replay ReplayPolicy    `json:"replay"`
}

// AppendJSON appends what json.Marshal writes of the patch to buf
// (core.JSONAppender).
func (p toolStart) AppendJSON(buf []byte) ([]byte, error) {
	return appendOr(buf, p, func(buf []byte) ([]byte, bool) {
		buf = append(buf, `{"args":`...)
		ok := true
		if p.Args == nil {
			buf = append(buf, "null"...)
		} else {
			buf, ok = jsonvalue.AppendRaw(buf, p.Args)
		}
		buf = p.Limits.appendJSON(append(buf, `,"limits":`...))
		buf = jsonvalue.AppendString(append(buf, `,"replay":`...), string(p.Replay))
		return append(buf, '}'), ok
	})
}
