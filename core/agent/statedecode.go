package agent

import (
	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/storage"
)

// The fast paths of decoding the states every turn decodes: a generation's
// (each attempt), a tool call's (its start and its settlement), a
// post_tools' (its start) and what it reads of each settled call (its
// outcome). Each reads the shapes this package writes by
// hand and gives up (false) on anything else: a key given twice, a key
// matching a field only without regard to case, a value of another kind, a
// field it leaves to encoding/json (a deferred handle, a job, a tool
// state's output).
// decodeState then decodes with encoding/json as before, so that what a
// state means, and the error it gets, is decided in one place. The tests
// hold the two to the same results on every text the fast path takes.

// stateDecoder is a state with a fast path: it reads d into the zero state.
type stateDecoder interface {
	decodeFast(d *jsonvalue.Decoder) bool
}

// fastStates is cleared only by this package's tests, to decode with
// encoding/json alone: the reference the fast paths are held to.
var fastStates = true

// decodeFast reads data into s, a zero state, if s has a fast path that
// takes data whole.
func decodeFast(s any, data []byte) bool {
	f, ok := s.(stateDecoder)
	if !ok || !fastStates {
		return false
	}
	d := jsonvalue.NewDecoder(data)
	return f.decodeFast(d) && d.End()
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
)

func (s *GenerationState) decodeFast(d *jsonvalue.Decoder) bool {
	return d.Members(generationFields, func(i int) bool {
		switch i {
		case 0:
			return idsInto(d, &s.Inputs)
		case 1:
			return structInto(d, func() bool { return s.Config.decodeFast(d) })
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

func (c *GenerationConfig) decodeFast(d *jsonvalue.Decoder) bool {
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

func (s *ToolState) decodeFast(d *jsonvalue.Decoder) bool {
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

func (s *PostToolsState) decodeFast(d *jsonvalue.Decoder) bool {
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

func (v *toolOutcomeView) decodeFast(d *jsonvalue.Decoder) bool {
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
