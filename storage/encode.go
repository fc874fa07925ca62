package storage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/jsonvalue"
)

// AppendWrites appends ws as json.Marshal writes them, byte for byte,
// without reflection, and reports true. A raw value that needs escaping or
// compacting (<, > or &, U+2028, space outside a string) is written by
// encoding/json itself, model messages by their own AppendJSON. What it
// cannot write the same way (a value json.Marshal fails on: a scope of no
// kind, a message that does not encode) it reports false for, leaving buf's
// bytes past its length undefined: the caller asks json.Marshal, for its
// error. The JSONL store writes a batch's line with it, and the SQLite
// store measures a batch against BatchBytesMax.
func AppendWrites(buf []byte, ws []Write) ([]byte, bool) {
	if ws == nil {
		return append(buf, "null"...), true
	}
	out := append(buf, '[')
	for i := range ws {
		if i > 0 {
			out = append(out, ',')
		}
		var ok bool
		if out, ok = AppendWrite(out, &ws[i]); !ok {
			return buf, false
		}
	}
	return append(out, ']'), true
}

// AppendWrite appends one write as AppendWrites writes it inside its
// array, and reports true; on false, as there, buf's bytes past its length
// are undefined and json.Marshal has the error.
func AppendWrite(buf []byte, w *Write) ([]byte, bool) {
	e := writeEncoder{buf: buf}
	if e.write(w); e.failed {
		return buf, false
	}
	if jsonvalue.Checking() {
		checkAppendedWrite(*w, e.buf[len(buf):]) // a copy: w must not escape, callers keep it on the stack
	}
	return e.buf, true
}

// checkAppendedWrite holds what AppendWrite wrote of w to json.Marshal's
// bytes (jsonvalue.SetChecking), panicking with a
// *jsonvalue.FastPathError where they part. A store encodes a batch on its
// committer's goroutine.
func checkAppendedWrite(w Write, got []byte) {
	want, err := json.Marshal(w)
	if err != nil || bytes.Equal(got, want) {
		return
	}
	panic(&jsonvalue.FastPathError{What: "storage.AppendWrite", Detail: fmt.Sprintf("it wrote a %s write otherwise than json.Marshal, %s",
		w.Type, jsonvalue.Parting("AppendWrite", got, "json.Marshal", want))})
}

// writeEncoder is AppendWrites' state: what it wrote, and whether it met a
// value it leaves to json.Marshal.
type writeEncoder struct {
	buf    []byte
	failed bool
}

// key writes a member's key after a comma; the object is open and has a
// member already.
func (e *writeEncoder) key(k string) {
	e.buf = append(e.buf, ',')
	e.buf = append(e.buf, k...)
}

func (e *writeEncoder) id(n ID) { e.buf = strconv.AppendInt(e.buf, int64(n), 10) }

// str writes s quoted and escaped as encoding/json writes it.
func (e *writeEncoder) str(s string) { e.buf = jsonvalue.AppendString(e.buf, s) }

// raw writes a raw value, itself when it is compact and needs no escape.
func (e *writeEncoder) raw(r json.RawMessage) {
	var ok bool
	if e.buf, ok = jsonvalue.AppendRaw(e.buf, r); !ok {
		e.marshal(r)
	}
}

// messages writes model messages as their AppendJSON does, which is what
// encoding/json writes of them.
func (e *writeEncoder) messages(ms []ai.Message) {
	e.buf = append(e.buf, '[')
	for i := range ms {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		var err error
		if e.buf, err = ms[i].AppendJSON(e.buf); err != nil {
			e.failed = true
			return
		}
	}
	e.buf = append(e.buf, ']')
}

// marshal writes v with encoding/json, as it writes v inside the line.
func (e *writeEncoder) marshal(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		e.failed = true
		return
	}
	e.buf = append(e.buf, b...)
}

func (e *writeEncoder) ids(ids []ID) {
	e.buf = append(e.buf, '[')
	for i, n := range ids {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.id(n)
	}
	e.buf = append(e.buf, ']')
}

func (e *writeEncoder) write(w *Write) {
	e.buf = append(e.buf, `{"type":`...)
	e.str(string(w.Type))
	if w.Addr != nil {
		e.key(`"addr":`)
		e.address(w.Addr)
	}
	if len(w.Value) != 0 {
		e.key(`"value":`)
		e.raw(w.Value)
	}
	if w.Element != 0 {
		e.key(`"element":`)
		e.id(w.Element)
	}
	if c := w.Conversation; c != nil {
		e.key(`"conversation":{"id":`)
		e.id(c.ID)
		if p := c.Parent; p != nil {
			e.key(`"parent":{"conversationId":`)
			e.id(p.ConversationID)
			e.key(`"at":`)
			e.id(p.At)
			e.buf = append(e.buf, '}')
		}
		if c.Owner != 0 {
			e.key(`"owner":`)
			e.id(c.Owner)
		}
		e.buf = append(e.buf, '}')
	}
	if w.Entry != nil {
		e.key(`"entry":`)
		e.entry(w.Entry)
	}
	if w.Task != nil {
		e.key(`"task":`)
		e.task(w.Task)
	}
	if w.ID != 0 {
		e.key(`"id":`)
		e.id(w.ID)
	}
	if w.Status != "" {
		e.key(`"status":`)
		e.str(w.Status)
	}
	if w.Role != "" {
		e.key(`"role":`)
		e.str(string(w.Role))
	}
	if len(w.State) != 0 {
		e.key(`"state":`)
		e.raw(w.State)
	}
	if w.Abort {
		e.key(`"abort":true`)
	}
	if len(w.Owns) != 0 {
		e.key(`"owns":`)
		e.ids(w.Owns)
	}
	e.buf = append(e.buf, '}')
}

func (e *writeEncoder) address(a *Address) {
	e.buf = append(e.buf, `{"scope":`...)
	switch a.Scope.Kind {
	case ScopeSession:
		e.buf = append(e.buf, `{"session":true}`...)
	case ScopeConversation:
		e.buf = append(e.buf, `{"conversation":`...)
		e.id(a.Scope.ID)
		e.buf = append(e.buf, '}')
	case ScopeScratch:
		e.buf = append(e.buf, `{"scratch":`...)
		e.id(a.Scope.ID)
		e.buf = append(e.buf, '}')
	default:
		e.failed = true // Scope.MarshalJSON's error
	}
	e.key(`"namespace":`)
	e.str(a.Namespace)
	if a.Key != "" {
		e.key(`"key":`)
		e.str(a.Key)
	}
	if a.Rewind {
		e.key(`"rewind":true`)
	}
	e.buf = append(e.buf, '}')
}

func (e *writeEncoder) entry(en *Entry) {
	e.buf = append(e.buf, `{"id":`...)
	e.id(en.ID)
	e.key(`"conversationId":`)
	e.id(en.ConversationID)
	e.key(`"kind":`)
	e.str(en.Kind)
	if en.ByTaskID != 0 {
		e.key(`"byTaskId":`)
		e.id(en.ByTaskID)
	}
	if en.Key != "" {
		e.key(`"key":`)
		e.str(en.Key)
	}
	if len(en.Data) != 0 {
		e.key(`"data":`)
		e.raw(en.Data)
	}
	if len(en.Model) != 0 {
		e.key(`"model":`)
		e.messages(en.Model)
	}
	if en.Head != 0 {
		e.key(`"head":`)
		e.id(en.Head)
	}
	if len(en.Edits) != 0 {
		e.key(`"edits":[`)
		for i, c := range en.Edits {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, `{"target":`...)
			e.id(c.Target)
			e.key(`"action":`)
			e.str(string(c.Action))
			if len(c.Messages) != 0 {
				e.key(`"messages":`)
				e.messages(c.Messages)
			}
			e.buf = append(e.buf, '}')
		}
		e.buf = append(e.buf, ']')
	}
	e.buf = append(e.buf, '}')
}

func (e *writeEncoder) task(t *Task) {
	e.buf = append(e.buf, `{"id":`...)
	e.id(t.ID)
	e.key(`"conversationId":`)
	e.id(t.ConversationID)
	e.key(`"kind":`)
	e.str(t.Kind)
	e.key(`"status":`)
	e.str(t.Status)
	e.key(`"role":`)
	e.str(string(t.Role))
	if len(t.State) != 0 {
		e.key(`"state":`)
		e.raw(t.State)
	}
	if len(t.After) != 0 {
		e.key(`"after":`)
		e.ids(t.After)
	}
	if t.Background {
		e.key(`"background":true`)
	}
	if len(t.Owns) != 0 {
		e.key(`"owns":`)
		e.ids(t.Owns)
	}
	if t.Abort {
		e.key(`"abort":true`)
	}
	e.buf = append(e.buf, '}')
}
