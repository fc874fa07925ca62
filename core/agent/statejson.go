package agent

import (
	"encoding/json"
	"strconv"

	"github.com/pico-go/pico/internal/jsonvalue"
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
// a state is not skipped by its fast path.
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
			buf = jsonvalue.AppendString(append(buf, `{"severity":`...), d.Severity)
			buf = jsonvalue.AppendString(append(buf, `,"message":`...), d.Message)
			if d.Code != "" {
				buf = jsonvalue.AppendString(append(buf, `,"code":`...), d.Code)
			}
			buf = append(buf, '}')
		}
		buf = append(buf, ']')
	}
	t := r.Truncation
	sep(`"truncation":{"truncated":`)
	buf = strconv.AppendBool(buf, t.Truncated)
	buf = strconv.AppendInt(append(buf, `,"totalLines":`...), int64(t.TotalLines), 10)
	buf = strconv.AppendInt(append(buf, `,"totalBytes":`...), int64(t.TotalBytes), 10)
	buf = strconv.AppendInt(append(buf, `,"shownLines":`...), int64(t.ShownLines), 10)
	buf = strconv.AppendInt(append(buf, `,"shownBytes":`...), int64(t.ShownBytes), 10)
	if t.SpillPath != "" {
		buf = jsonvalue.AppendString(append(buf, `,"spillPath":`...), t.SpillPath)
	}
	buf = append(buf, '}')
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

// appendStrings writes an array of strings.
func appendStrings(buf []byte, ss []string) []byte {
	buf = append(buf, '[')
	for i, s := range ss {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = jsonvalue.AppendString(buf, s)
	}
	return append(buf, ']')
}
