package agent

import (
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

var (
	generationFields = jsonvalue.SomeFields("inputs", "config", "attempt", "maxAttempts", "notBefore", "deferred",
		"afterCollapse", "overflowRetried", "assistant", "reason", "collapse")
	generationConfigFields = jsonvalue.SomeFields("model", "thinking", "selectedTools", "profile", "budgetMs")
	modelRefFields         = jsonvalue.SomeFields("provider", "modelId")
	toolFields             = jsonvalue.SomeFields("call", "assistant", "offered", "budgetMs", "args", "replay", "limits",
		"job", "output", "result")
	outputLimitsFields = jsonvalue.SomeFields("maxBytes", "maxLines", "retain")
	postToolsFields    = jsonvalue.SomeFields("assistant", "tools", "inputs", "stopped", "reason")
	outcomeViewFields  = jsonvalue.SomeFields("output")
	outcomeFields      = jsonvalue.SomeFields("addedTools", "terminate", "handoff")
	inputResultFields  = jsonvalue.SomeFields("status", "requestId", "placementEntryId", "resultEntryId", "reason")
)

// DecodeJSON reads a generation state this package writes into the zero value it is
// called on (core.JSONDecoder).
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

// DecodeJSON reads a tool state this package writes into the zero value it is
// called on (core.JSONDecoder).
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

// DecodeJSON reads a post_tools state this package writes into the zero value it is
// called on (core.JSONDecoder).
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

// DecodeJSON reads a settled call's outcome this package writes into the zero value it is
// called on (core.JSONDecoder).
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

// DecodeJSON reads a input result this package writes into the zero value it is
// called on (core.JSONDecoder).
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
