package ai

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/pico-go/pico/internal/jsonvalue"
)

// Canonical is the message as a store reads it back: every raw JSON value
// it holds (a tool call's arguments, the diagnostics, the details, a
// deferred response's data, a nested call's arguments, an added tool's
// parameters and constrained sampling) as json.Marshal writes it —
// compact, with <, >, & and U+2028 and U+2029 escaped — so that a store
// that keeps the message as it was given answers as one that wrote it to
// disk and read it back. A message that is canonical already comes back as
// it is, sharing everything; otherwise what changes is copied and m is
// left alone.
//
// The message must also be one that decodes: a known role and stop
// reason, blocks of known types, a tool call and a tool result with their
// call's id, raw values that are JSON. Otherwise Canonical returns an
// error naming what is wrong, and a store must not take the message: it
// could not read back what it wrote.
func (m Message) Canonical() (Message, error) { return m.canonical(true) }

// CheckCanonical reports, as an error naming it, what of the message
// Canonical would refuse or change: a store holds it to that before it
// takes the message, so that a store holding messages as given answers as
// one that reads them from disk.
func (m Message) CheckCanonical() error {
	_, err := m.canonical(false)
	return err
}

// canonical is Canonical, or with fix false its check.
func (m Message) canonical(fix bool) (Message, error) {
	if err := m.check(); err != nil {
		return m, err
	}
	var err error
	canon := func(raw *json.RawMessage, what string, args ...any) {
		if err != nil || len(*raw) == 0 || jsonvalue.Verbatim(*raw) {
			return
		}
		switch {
		case !json.Valid(*raw):
			err = fmt.Errorf("ai: %s is not JSON: %s", fmt.Sprintf(what, args...), clip(*raw))
		case !fix:
			err = fmt.Errorf("ai: %s is not as json.Marshal writes it: %s", fmt.Sprintf(what, args...), clip(*raw))
		default:
			*raw, _ = json.Marshal(*raw) // valid: Marshal compacts and escapes, and cannot fail
		}
	}
	canon(&m.Diagnostics, "diagnostics")
	canon(&m.Details, "details")
	if m.Deferred != nil && !canonical(m.Deferred.Data) {
		d := *m.Deferred
		canon(&d.Data, "deferred data")
		m.Deferred = &d
	}
	cloned := false
	for i, b := range m.Content.Blocks {
		if err := b.check(); err != nil {
			return m, fmt.Errorf("%w (block %d)", err, i)
		}
		if !canonical(b.Arguments) {
			m.Content.Blocks, cloned = cloneOnce(m.Content.Blocks, cloned)
			canon(&m.Content.Blocks[i].Arguments, "block %d's arguments", i)
		}
	}
	if m.NestedCalls != nil {
		cloned = false
		for i, c := range m.NestedCalls.Calls {
			if !canonical(c.Arguments) {
				if !cloned {
					n := *m.NestedCalls
					m.NestedCalls = &n
				}
				m.NestedCalls.Calls, cloned = cloneOnce(m.NestedCalls.Calls, cloned)
				canon(&m.NestedCalls.Calls[i].Arguments, "nested call %d's arguments", i)
			}
		}
	}
	cloned = false
	for i, t := range m.ToolsAdded {
		if !canonical(t.Parameters) || !canonical(t.ConstrainedSampling) {
			m.ToolsAdded, cloned = cloneOnce(m.ToolsAdded, cloned)
			canon(&m.ToolsAdded[i].Parameters, "added tool %q's parameters", t.Name)
			canon(&m.ToolsAdded[i].ConstrainedSampling, "added tool %q's constrained sampling", t.Name)
		}
	}
	return m, err
}

// canonical reports whether a raw value is absent or what json.Marshal
// writes of it.
func canonical(raw json.RawMessage) bool { return len(raw) == 0 || jsonvalue.Verbatim(raw) }

// cloneOnce is s, cloned unless it already was.
func cloneOnce[T any](s []T, cloned bool) ([]T, bool) {
	if cloned {
		return s, true
	}
	return slices.Clone(s), true
}

// clip is raw, cut short for an error message.
func clip(raw []byte) string {
	if len(raw) > 64 {
		return string(raw[:64]) + "…"
	}
	return string(raw)
}
