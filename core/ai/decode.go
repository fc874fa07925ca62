package ai

import (
	"github.com/pico-go/pico/internal/jsonvalue"
)

// The fast paths of Message, Block and Content decoding. Each reads the
// shapes this package writes, and the texts close to them, by hand, and
// gives up (false) on anything else: a key given twice, a key matching a
// field only without regard to case, a value of another kind, a field it
// leaves to encoding/json (a message's deferred, nestedCalls and sections),
// and every text the checks of UnmarshalJSON refuse. UnmarshalJSON then
// decodes with encoding/json as before, so that what a text means, and the
// error it gets, is decided in one place. The tests hold the two to the
// same results on every text the fast path takes.

// fastPaths is cleared only by this package's tests, to decode with
// encoding/json alone: the reference the fast paths are held to.
var fastPaths = true

var messageFields = []string{
	"role", "content", "api", "provider", "model", "usage", "stopReason", "responseModel", "responseId",
	"providerThinkingLevel", "thinkingLevel", "diagnostics", "deferred", "errorMessage", "rawStopReason", "endTurn",
	"toolCallId", "toolName", "details", "nestedCalls", "isError", "sections", "toolsAdded", "toolsRemoved",
	"timestamp", "durationMs",
}

var blockFields = []string{
	"type", "text", "textSignature", "thinking", "thinkingSignature", "redacted", "data", "mimeType", "id", "name",
	"arguments", "thoughtSignature", "namespace",
}

var (
	usageFields   = []string{"input", "output", "cacheRead", "cacheWrite", "cacheWrite1h", "reasoning", "totalTokens", "cost"}
	costFields    = []string{"input", "output", "cacheRead", "cacheWrite", "total"}
	toolFields    = []string{"name", "description", "parameters", "constrainedSampling"}
	toolRefFields = []string{"name"}
)

// fields tracks the members of one object: each field once, and a key
// that is none of them is skipped unless it names one in another case.
type fields struct {
	names []string
	seen  uint32
}

// first reports whether field i was not seen yet, and marks it.
func (f *fields) first(i int) bool {
	if f.seen&(1<<i) != 0 {
		return false
	}
	f.seen |= 1 << i
	return true
}

// field returns the index of key among the names, -1 for an unknown key
// the caller may skip, or -2 when the fast path must give up.
func (f *fields) field(key []byte) int {
	for i, n := range f.names {
		if string(key) == n {
			if !f.first(i) {
				return -2
			}
			return i
		}
	}
	if jsonvalue.FoldsTo(key, f.names...) {
		return -2
	}
	return -1
}

// str reads a string into s; null leaves s as it is, as encoding/json does.
func str[S ~string](d *jsonvalue.Decoder, s *S) bool {
	if d.Null() {
		return true
	}
	v, ok := d.String()
	*s = S(v)
	return ok
}

func int64Of(d *jsonvalue.Decoder, n *int64) bool {
	if d.Null() {
		return true
	}
	v, ok := d.Int64()
	*n = v
	return ok
}

func float64Of(d *jsonvalue.Decoder, f *float64) bool {
	if d.Null() {
		return true
	}
	v, ok := d.Float64()
	*f = v
	return ok
}

func boolOf(d *jsonvalue.Decoder, b *bool) bool {
	if d.Null() {
		return true
	}
	v, ok := d.Bool()
	*b = v
	return ok
}

// boolPtr reads an optional boolean: null leaves it nil.
func boolPtr(d *jsonvalue.Decoder, p **bool) bool {
	if d.Null() {
		return true
	}
	v, ok := d.Bool()
	*p = &v
	return ok
}

func raw(d *jsonvalue.Decoder, r *[]byte) bool {
	v, ok := d.Raw()
	*r = v
	return ok
}

// object reads an object member by member: each known field's index to
// set, unknown keys skipped.
func object(d *jsonvalue.Decoder, names []string, set func(i int) bool) bool {
	f := fields{names: names}
	return d.Object(func(key []byte) bool {
		switch i := f.field(key); i {
		case -2:
			return false
		case -1:
			return d.Skip()
		default:
			return set(i)
		}
	})
}

// decodeMessage is Message's fast path.
func decodeMessage(data []byte) (Message, bool) {
	d := jsonvalue.NewDecoder(data)
	m, ok := readMessage(d)
	return m, ok && d.End()
}

func readMessage(d *jsonvalue.Decoder) (m Message, ok bool) {
	ok = object(d, messageFields, func(i int) bool {
		switch i {
		case 0:
			return str(d, &m.Role)
		case 1:
			return readContent(d, &m.Content)
		case 2:
			return str(d, &m.API)
		case 3:
			return str(d, &m.Provider)
		case 4:
			return str(d, &m.Model)
		case 5:
			if d.Null() {
				return true
			}
			m.Usage = new(Usage)
			return readUsage(d, m.Usage)
		case 6:
			return str(d, &m.StopReason)
		case 7:
			return str(d, &m.ResponseModel)
		case 8:
			return str(d, &m.ResponseID)
		case 9:
			return str(d, &m.ProviderThinkingLevel)
		case 10:
			return str(d, &m.ThinkingLevel)
		case 11:
			return raw(d, (*[]byte)(&m.Diagnostics))
		case 13:
			return str(d, &m.ErrorMessage)
		case 14:
			return str(d, &m.RawStopReason)
		case 15:
			return boolPtr(d, &m.EndTurn)
		case 16:
			return str(d, &m.ToolCallID)
		case 17:
			return str(d, &m.ToolName)
		case 18:
			return raw(d, (*[]byte)(&m.Details))
		case 20:
			return boolPtr(d, &m.IsError)
		case 22:
			if d.Null() {
				return true
			}
			m.ToolsAdded = []Tool{}
			return d.Array(func() bool {
				var t Tool
				ok := object(d, toolFields, func(i int) bool {
					switch i {
					case 0:
						return str(d, &t.Name)
					case 1:
						return str(d, &t.Description)
					case 2:
						return raw(d, (*[]byte)(&t.Parameters))
					default:
						return raw(d, (*[]byte)(&t.ConstrainedSampling))
					}
				})
				m.ToolsAdded = append(m.ToolsAdded, t)
				return ok
			})
		case 23:
			if d.Null() {
				return true
			}
			m.ToolsRemoved = []ToolRef{}
			return d.Array(func() bool {
				var t ToolRef
				ok := object(d, toolRefFields, func(int) bool { return str(d, &t.Name) })
				m.ToolsRemoved = append(m.ToolsRemoved, t)
				return ok
			})
		case 24:
			return int64Of(d, &m.Timestamp)
		case 25:
			return int64Of(d, &m.DurationMs)
		}
		return false // deferred, nestedCalls, sections: encoding/json's
	})
	return m, ok && (&m).check() == nil
}

func readUsage(d *jsonvalue.Decoder, u *Usage) bool {
	return object(d, usageFields, func(i int) bool {
		switch i {
		case 0:
			return int64Of(d, &u.Input)
		case 1:
			return int64Of(d, &u.Output)
		case 2:
			return int64Of(d, &u.CacheRead)
		case 3:
			return int64Of(d, &u.CacheWrite)
		case 4:
			return int64Of(d, &u.CacheWrite1h)
		case 5:
			return int64Of(d, &u.Reasoning)
		case 6:
			return int64Of(d, &u.TotalTokens)
		}
		c := &u.Cost
		if d.Null() {
			return true
		}
		return object(d, costFields, func(i int) bool {
			switch i {
			case 0:
				return float64Of(d, &c.Input)
			case 1:
				return float64Of(d, &c.Output)
			case 2:
				return float64Of(d, &c.CacheRead)
			case 3:
				return float64Of(d, &c.CacheWrite)
			}
			return float64Of(d, &c.Total)
		})
	})
}

// readContent reads a bare string or an array of blocks; null, which
// Content.UnmarshalJSON turns into no blocks, is left to it.
func readContent(d *jsonvalue.Decoder, c *Content) bool {
	if d.Peek() == '"' {
		s, ok := d.String()
		*c = PlainText(s)
		return ok
	}
	bs := []Block{}
	ok := d.Array(func() bool {
		b, ok := readBlock(d)
		bs = append(bs, b)
		return ok
	})
	*c = Content{Blocks: bs}
	return ok
}

// decodeBlock is Block's fast path.
func decodeBlock(data []byte) (Block, bool) {
	d := jsonvalue.NewDecoder(data)
	b, ok := readBlock(d)
	return b, ok && d.End()
}

func readBlock(d *jsonvalue.Decoder) (b Block, ok bool) {
	ok = object(d, blockFields, func(i int) bool {
		switch i {
		case 0:
			return str(d, &b.Type)
		case 1:
			return str(d, &b.Text)
		case 2:
			return str(d, &b.TextSignature)
		case 3:
			return str(d, &b.Thinking)
		case 4:
			return str(d, &b.ThinkingSignature)
		case 5:
			return boolOf(d, &b.Redacted)
		case 6:
			return str(d, &b.Data)
		case 7:
			return str(d, &b.MimeType)
		case 8:
			return str(d, &b.ID)
		case 9:
			return str(d, &b.Name)
		case 10:
			return raw(d, (*[]byte)(&b.Arguments))
		case 11:
			return str(d, &b.ThoughtSignature)
		}
		return str(d, &b.Namespace)
	})
	return b, ok && b.check() == nil
}
