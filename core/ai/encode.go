package ai

import (
	"encoding/json"
	"strconv"

	"github.com/pico-go/pico/internal/jsonvalue"
)

// AppendJSON appends what json.Marshal writes of the message to buf: by
// hand, but for a message with deferred calls, nested calls or system
// sections, raw values encoding/json would rewrite
// (jsonvalue.AppendRaw) or costs it refuses, which go through encoding/json
// with the rest of the message. A Message has no MarshalJSON, so that
// where encoding/json writes one, its errors and options stay its own.
func (m Message) AppendJSON(buf []byte) ([]byte, error) {
	if out, ok := m.appendPlain(buf); ok {
		return out, nil
	}
	raw, err := json.Marshal(m)
	return append(buf, raw...), err
}

// appendPlain writes the message as encoding/json writes it, or reports
// false, appending nothing.
func (m Message) appendPlain(buf []byte) ([]byte, bool) {
	if m.Deferred != nil || m.NestedCalls != nil || m.Sections != nil {
		return buf, false
	}
	start := len(buf)
	ok := true
	raw := func(key string, r json.RawMessage) {
		if ok && len(r) > 0 {
			buf, ok = jsonvalue.AppendRaw(append(buf, key...), r)
		}
	}
	flag := func(key string, b *bool) {
		if b != nil {
			buf = strconv.AppendBool(append(buf, key...), *b)
		}
	}
	buf = jsonvalue.AppendString(append(buf, `{"role":`...), string(m.Role))
	buf, ok = m.Content.appendPlain(append(buf, `,"content":`...))
	buf = appendMember(buf, `,"api":`, m.API)
	buf = appendMember(buf, `,"provider":`, m.Provider)
	buf = appendMember(buf, `,"model":`, m.Model)
	if m.Usage != nil {
		var usageOK bool
		buf, usageOK = m.Usage.appendPlain(append(buf, `,"usage":`...))
		ok = ok && usageOK
	}
	buf = appendMember(buf, `,"stopReason":`, string(m.StopReason))
	buf = appendMember(buf, `,"responseModel":`, m.ResponseModel)
	buf = appendMember(buf, `,"responseId":`, m.ResponseID)
	buf = appendMember(buf, `,"providerThinkingLevel":`, m.ProviderThinkingLevel)
	buf = appendMember(buf, `,"thinkingLevel":`, m.ThinkingLevel)
	raw(`,"diagnostics":`, m.Diagnostics)
	buf = appendMember(buf, `,"errorMessage":`, m.ErrorMessage)
	buf = appendMember(buf, `,"rawStopReason":`, m.RawStopReason)
	flag(`,"endTurn":`, m.EndTurn)
	buf = appendMember(buf, `,"toolCallId":`, m.ToolCallID)
	buf = appendMember(buf, `,"toolName":`, m.ToolName)
	raw(`,"details":`, m.Details)
	flag(`,"isError":`, m.IsError)
	if ok && len(m.ToolsAdded) > 0 {
		buf = append(buf, `,"toolsAdded":[`...)
		for i, t := range m.ToolsAdded {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, ok = t.appendPlain(buf); !ok {
				break
			}
		}
		buf = append(buf, ']')
	}
	if len(m.ToolsRemoved) > 0 {
		buf = append(buf, `,"toolsRemoved":[`...)
		for i, t := range m.ToolsRemoved {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = jsonvalue.AppendString(append(buf, `{"name":`...), t.Name)
			buf = append(buf, '}')
		}
		buf = append(buf, ']')
	}
	buf = strconv.AppendInt(append(buf, `,"timestamp":`...), m.Timestamp, 10)
	if m.DurationMs != 0 {
		buf = strconv.AppendInt(append(buf, `,"durationMs":`...), m.DurationMs, 10)
	}
	if !ok {
		return buf[:start], false
	}
	return append(buf, '}'), true
}

// appendPlain writes the content as MarshalJSON does, or reports false.
func (c Content) appendPlain(buf []byte) ([]byte, bool) {
	if c.Plain && len(c.Blocks) == 1 && c.Blocks[0].Type == BlockText && c.Blocks[0].TextSignature == "" {
		return jsonvalue.AppendString(buf, c.Blocks[0].Text), true
	}
	buf = append(buf, '[')
	for i, b := range c.Blocks {
		if i > 0 {
			buf = append(buf, ',')
		}
		var ok bool
		if buf, ok = b.appendPlain(buf); !ok {
			return buf, false
		}
	}
	return append(buf, ']'), true
}

// AppendJSON appends what json.Marshal writes of the tool to buf: by hand,
// but for parameters or a constrained sampling encoding/json would rewrite
// (jsonvalue.AppendRaw) or refuses, where the tool goes through
// encoding/json. A system message's tool changes and the faux provider's
// estimate of a request write tools this way.
func (t Tool) AppendJSON(buf []byte) ([]byte, error) {
	if out, ok := t.appendPlain(buf); ok {
		return out, nil
	}
	raw, err := json.Marshal(t)
	return append(buf, raw...), err
}

// appendPlain writes the tool as encoding/json does, or reports false,
// appending nothing.
func (t Tool) appendPlain(buf []byte) ([]byte, bool) {
	start := len(buf)
	buf = jsonvalue.AppendString(append(buf, `{"name":`...), t.Name)
	buf = jsonvalue.AppendString(append(buf, `,"description":`...), t.Description)
	buf = append(buf, `,"parameters":`...)
	ok := true
	switch {
	case t.Parameters == nil: // a nil json.RawMessage writes null
		buf = append(buf, "null"...)
	default: // an empty one is an error, which encoding/json gives
		buf, ok = jsonvalue.AppendRaw(buf, t.Parameters)
	}
	if ok && len(t.ConstrainedSampling) > 0 {
		buf, ok = jsonvalue.AppendRaw(append(buf, `,"constrainedSampling":`...), t.ConstrainedSampling)
	}
	if !ok {
		return buf[:start], false
	}
	return append(buf, '}'), true
}

// AppendJSON appends what json.Marshal writes of the usage to buf, by hand
// (core.JSONAppender) but for a cost encoding/json refuses, whose error is
// json.Marshal's: the usage rows and totals every generation writes.
func (u Usage) AppendJSON(buf []byte) ([]byte, error) {
	start := len(buf)
	if out, ok := u.appendPlain(buf); ok {
		return out, nil
	}
	raw, err := json.Marshal(u)
	return append(buf[:start], raw...), err
}

// appendPlain writes the usage as encoding/json does, or reports false
// for a cost it refuses.
func (u *Usage) appendPlain(buf []byte) ([]byte, bool) {
	integer := func(key string, n int64) { buf = strconv.AppendInt(append(buf, key...), n, 10) }
	integer(`{"input":`, u.Input)
	integer(`,"output":`, u.Output)
	integer(`,"cacheRead":`, u.CacheRead)
	integer(`,"cacheWrite":`, u.CacheWrite)
	if u.CacheWrite1h != 0 {
		integer(`,"cacheWrite1h":`, u.CacheWrite1h)
	}
	if u.Reasoning != 0 {
		integer(`,"reasoning":`, u.Reasoning)
	}
	integer(`,"totalTokens":`, u.TotalTokens)
	ok := true
	number := func(key string, f float64) {
		if ok {
			buf, ok = jsonvalue.AppendFloat64(append(buf, key...), f)
		}
	}
	number(`,"cost":{"input":`, u.Cost.Input)
	number(`,"output":`, u.Cost.Output)
	number(`,"cacheRead":`, u.Cost.CacheRead)
	number(`,"cacheWrite":`, u.Cost.CacheWrite)
	number(`,"total":`, u.Cost.Total)
	return append(buf, "}}"...), ok
}
