package ai

import (
	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/internal/plant"
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

var messageFields = jsonvalue.SomeFields(
	"role", "content", "api", "provider", "model", "usage", "stopReason", "responseModel", "responseId",
	"providerThinkingLevel", "thinkingLevel", "diagnostics", "deferred", "errorMessage", "rawStopReason", "endTurn",
	"toolCallId", "toolName", "details", "nestedCalls", "isError", "sections", "toolsAdded", "toolsRemoved",
	"timestamp", "durationMs",
)

var blockFields = jsonvalue.SomeFields(
	"type", "text", "textSignature", "thinking", "thinkingSignature", "redacted", "data", "mimeType", "id", "name",
	"arguments", "thoughtSignature", "namespace",
)

var (
	usageFields   = jsonvalue.SomeFields("input", "output", "cacheRead", "cacheWrite", "cacheWrite1h", "reasoning", "totalTokens", "cost")
	costFields    = jsonvalue.SomeFields("input", "output", "cacheRead", "cacheWrite", "total")
	toolFields    = jsonvalue.SomeFields("name", "description", "parameters", "constrainedSampling")
	toolRefFields = jsonvalue.SomeFields("name")
)

// flagPtr reads an optional boolean: null leaves it nil.
func flagPtr(d *jsonvalue.Decoder, p **bool) bool {
	return jsonvalue.PointerInto(d, p, func(b *bool) bool { return jsonvalue.BoolInto(d, b) })
}

// decodeMessage is Message's fast path.
func decodeMessage(data []byte) (Message, bool) {
	d := jsonvalue.NewDecoder(data)
	m, ok := readMessage(d)
	return m, ok && d.End()
}

// ReadMessage reads the message at d's position into m by UnmarshalJSON's
// fast path, for a decoder of a larger text that holds messages (a
// storage line): it saves scanning each message twice, once to find its
// end and again to decode it. False means the fast path gave up, on a
// text UnmarshalJSON may still take or refuse: the caller decodes the
// whole text with encoding/json instead, which calls UnmarshalJSON.
func ReadMessage(d *jsonvalue.Decoder, m *Message) bool {
	if !fastPaths {
		return false
	}
	var ok bool
	*m, ok = readMessage(d)
	return ok
}

func readMessage(d *jsonvalue.Decoder) (m Message, ok bool) {
	ok = d.Members(messageFields, func(i int) bool {
		switch i {
		case 0:
			return jsonvalue.StringInto(d, &m.Role)
		case 1:
			return readContent(d, &m.Content)
		case 2:
			return jsonvalue.StringInto(d, &m.API)
		case 3:
			return jsonvalue.StringInto(d, &m.Provider)
		case 4:
			return jsonvalue.StringInto(d, &m.Model)
		case 5:
			return jsonvalue.PointerInto(d, &m.Usage, func(u *Usage) bool { return readUsage(d, u) })
		case 6:
			return jsonvalue.StringInto(d, &m.StopReason)
		case 7:
			return jsonvalue.StringInto(d, &m.ResponseModel)
		case 8:
			return jsonvalue.StringInto(d, &m.ResponseID)
		case 9:
			return jsonvalue.StringInto(d, &m.ProviderThinkingLevel)
		case 10:
			return jsonvalue.StringInto(d, &m.ThinkingLevel)
		case 11:
			return jsonvalue.RawInto(d, &m.Diagnostics)
		case 13:
			return jsonvalue.StringInto(d, &m.ErrorMessage)
		case 14:
			return jsonvalue.StringInto(d, &m.RawStopReason)
		case 15:
			return flagPtr(d, &m.EndTurn)
		case 16:
			return jsonvalue.StringInto(d, &m.ToolCallID)
		case 17:
			if plant.On("message-tool-name-unread") {
				var skip string
				return jsonvalue.StringInto(d, &skip)
			}
			return jsonvalue.StringInto(d, &m.ToolName)
		case 18:
			return jsonvalue.RawInto(d, &m.Details)
		case 20:
			return flagPtr(d, &m.IsError)
		case 22:
			return jsonvalue.SliceInto(d, &m.ToolsAdded, func(t *Tool) bool {
				return d.Members(toolFields, func(i int) bool {
					switch i {
					case 0:
						return jsonvalue.StringInto(d, &t.Name)
					case 1:
						return jsonvalue.StringInto(d, &t.Description)
					case 2:
						return jsonvalue.RawInto(d, &t.Parameters)
					}
					return jsonvalue.RawInto(d, &t.ConstrainedSampling)
				})
			})
		case 23:
			return jsonvalue.SliceInto(d, &m.ToolsRemoved, func(t *ToolRef) bool {
				return d.Members(toolRefFields, func(int) bool { return jsonvalue.StringInto(d, &t.Name) })
			})
		case 24:
			return jsonvalue.Int64Into(d, &m.Timestamp)
		case 25:
			return jsonvalue.Int64Into(d, &m.DurationMs)
		}
		return false // deferred, nestedCalls, sections: encoding/json's
	})
	return m, ok && (&m).check() == nil
}

func readUsage(d *jsonvalue.Decoder, u *Usage) bool {
	return d.Members(usageFields, func(i int) bool {
		switch i {
		case 0:
			return jsonvalue.Int64Into(d, &u.Input)
		case 1:
			return jsonvalue.Int64Into(d, &u.Output)
		case 2:
			return jsonvalue.Int64Into(d, &u.CacheRead)
		case 3:
			return jsonvalue.Int64Into(d, &u.CacheWrite)
		case 4:
			return jsonvalue.Int64Into(d, &u.CacheWrite1h)
		case 5:
			return jsonvalue.Int64Into(d, &u.Reasoning)
		case 6:
			return jsonvalue.Int64Into(d, &u.TotalTokens)
		}
		c := &u.Cost
		if d.Null() {
			return true
		}
		return d.Members(costFields, func(i int) bool {
			switch i {
			case 0:
				return jsonvalue.Float64Into(d, &c.Input)
			case 1:
				return jsonvalue.Float64Into(d, &c.Output)
			case 2:
				return jsonvalue.Float64Into(d, &c.CacheRead)
			case 3:
				return jsonvalue.Float64Into(d, &c.CacheWrite)
			}
			return jsonvalue.Float64Into(d, &c.Total)
		})
	})
}

// DecodeJSON reads a usage this package writes (the fast path messages
// read theirs with) into the zero usage it is called on, and reports
// whether it took the text whole (core.JSONDecoder): the session's usage
// totals, which every generation reads and writes back.
func (u *Usage) DecodeJSON(data []byte) bool {
	d := jsonvalue.NewDecoder(data)
	return fastPaths && readUsage(d, u) && d.End()
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
	ok = d.Members(blockFields, func(i int) bool {
		switch i {
		case 0:
			return jsonvalue.StringInto(d, &b.Type)
		case 1:
			return jsonvalue.StringInto(d, &b.Text)
		case 2:
			return jsonvalue.StringInto(d, &b.TextSignature)
		case 3:
			return jsonvalue.StringInto(d, &b.Thinking)
		case 4:
			return jsonvalue.StringInto(d, &b.ThinkingSignature)
		case 5:
			return jsonvalue.BoolInto(d, &b.Redacted)
		case 6:
			return jsonvalue.StringInto(d, &b.Data)
		case 7:
			return jsonvalue.StringInto(d, &b.MimeType)
		case 8:
			return jsonvalue.StringInto(d, &b.ID)
		case 9:
			return jsonvalue.StringInto(d, &b.Name)
		case 10:
			return jsonvalue.RawInto(d, &b.Arguments)
		case 11:
			return jsonvalue.StringInto(d, &b.ThoughtSignature)
		}
		return jsonvalue.StringInto(d, &b.Namespace)
	})
	return b, ok && b.check() == nil
}
