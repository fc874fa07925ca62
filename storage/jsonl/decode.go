package jsonl

import (
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/storage"
)

// decodeLine is parseLine's fast path: it reads the lines Commit writes,
// and texts close to them, by hand, and gives up (false) on everything
// else, each key it does not know and each one given twice among them, so
// that encoding/json, strict as parseLine runs it, decides what such a
// line means or what is wrong with it. The tests hold the two to the same
// batches on every line the fast path takes.
func decodeLine(text []byte) (line, bool) {
	d := jsonvalue.NewDecoder(text)
	var l line
	ok := object(d, lineFields, func(i int) bool {
		switch i {
		case 0:
			return id(d, &l.First)
		case 1:
			return id(d, &l.Task)
		}
		if d.Null() {
			return true
		}
		l.Writes = []storage.Write{}
		return d.Array(func() bool {
			var w storage.Write
			ok := readWrite(d, &w)
			l.Writes = append(l.Writes, w)
			return ok
		})
	})
	return l, ok && d.End()
}

var (
	lineFields         = []string{"first", "task", "writes"}
	writeFields        = []string{"type", "addr", "value", "element", "conversation", "entry", "task", "id", "status", "role", "state", "abort", "owns"}
	addressFields      = []string{"scope", "namespace", "key", "rewind"}
	conversationFields = []string{"id", "parent", "owner"}
	parentFields       = []string{"conversationId", "at"}
	entryFields        = []string{"id", "conversationId", "kind", "byTaskId", "key", "data", "model", "head", "edits"}
	editFields         = []string{"target", "action", "messages"}
	taskFields         = []string{"id", "conversationId", "kind", "status", "role", "state", "after", "background", "owns", "abort"}
)

// object reads an object whose keys must each be one of names, once.
func object(d *jsonvalue.Decoder, names []string, set func(i int) bool) bool {
	var seen uint32
	return d.Object(func(key []byte) bool {
		for i, n := range names {
			if string(key) == n {
				if seen&(1<<i) != 0 {
					return false
				}
				seen |= 1 << i
				return set(i)
			}
		}
		return false
	})
}

// id, str and flag read a field as encoding/json does: null leaves it as
// it is.
func id(d *jsonvalue.Decoder, v *storage.ID) bool {
	if d.Null() {
		return true
	}
	n, ok := d.Int64()
	*v = storage.ID(n)
	return ok
}

func str[S ~string](d *jsonvalue.Decoder, s *S) bool {
	if d.Null() {
		return true
	}
	v, ok := d.String()
	*s = S(v)
	return ok
}

func flag(d *jsonvalue.Decoder, b *bool) bool {
	if d.Null() {
		return true
	}
	v, ok := d.Bool()
	*b = v
	return ok
}

func raw(d *jsonvalue.Decoder, r *[]byte) bool {
	v, ok := d.Raw()
	*r = v
	return ok
}

func ids(d *jsonvalue.Decoder, v *[]storage.ID) bool {
	if d.Null() {
		return true
	}
	*v = []storage.ID{}
	return d.Array(func() bool {
		var n storage.ID
		ok := id(d, &n)
		*v = append(*v, n)
		return ok
	})
}

// messages reads model messages with their own UnmarshalJSON, as
// encoding/json would call it.
func messages(d *jsonvalue.Decoder, v *[]ai.Message) bool {
	if d.Null() {
		return true
	}
	*v = []ai.Message{}
	return d.Array(func() bool {
		text, ok := d.Value()
		if !ok {
			return false
		}
		var m ai.Message
		if m.UnmarshalJSON(text) != nil {
			return false
		}
		*v = append(*v, m)
		return true
	})
}

func readWrite(d *jsonvalue.Decoder, w *storage.Write) bool {
	return object(d, writeFields, func(i int) bool {
		switch i {
		case 0:
			return str(d, &w.Type)
		case 1:
			if d.Null() {
				return true
			}
			w.Addr = new(storage.Address)
			return readAddress(d, w.Addr)
		case 2:
			return raw(d, (*[]byte)(&w.Value))
		case 3:
			return id(d, &w.Element)
		case 4:
			if d.Null() {
				return true
			}
			w.Conversation = new(storage.Conversation)
			return readConversation(d, w.Conversation)
		case 5:
			if d.Null() {
				return true
			}
			w.Entry = new(storage.Entry)
			return readEntry(d, w.Entry)
		case 6:
			if d.Null() {
				return true
			}
			w.Task = new(storage.Task)
			return readTask(d, w.Task)
		case 7:
			return id(d, &w.ID)
		case 8:
			return str(d, &w.Status)
		case 9:
			return str(d, &w.Role)
		case 10:
			return raw(d, (*[]byte)(&w.State))
		case 11:
			return flag(d, &w.Abort)
		}
		return ids(d, &w.Owns)
	})
}

func readAddress(d *jsonvalue.Decoder, a *storage.Address) bool {
	return object(d, addressFields, func(i int) bool {
		switch i {
		case 0:
			return readScope(d, &a.Scope)
		case 1:
			return str(d, &a.Namespace)
		case 2:
			return str(d, &a.Key)
		}
		return flag(d, &a.Rewind)
	})
}

// readScope reads the one-member forms Scope.MarshalJSON writes; anything
// else is Scope.UnmarshalJSON's to judge.
func readScope(d *jsonvalue.Decoder, s *storage.Scope) bool {
	members := 0
	return d.Object(func(key []byte) bool {
		if members++; members > 1 {
			return false
		}
		switch string(key) {
		case "session":
			v, ok := d.Bool()
			*s = storage.SessionScope()
			return ok && v
		case "conversation", "scratch":
			n, ok := d.Int64()
			if !ok || n <= 0 {
				return false
			}
			if key[0] == 'c' {
				*s = storage.ConversationScope(storage.ID(n))
			} else {
				*s = storage.ScratchScope(storage.ID(n))
			}
			return true
		}
		return false
	}) && members == 1
}

func readConversation(d *jsonvalue.Decoder, c *storage.Conversation) bool {
	return object(d, conversationFields, func(i int) bool {
		switch i {
		case 0:
			return id(d, &c.ID)
		case 1:
			if d.Null() {
				return true
			}
			c.Parent = new(storage.ParentRef)
			return object(d, parentFields, func(i int) bool {
				if i == 0 {
					return id(d, &c.Parent.ConversationID)
				}
				return id(d, &c.Parent.At)
			})
		}
		return id(d, &c.Owner)
	})
}

func readEntry(d *jsonvalue.Decoder, e *storage.Entry) bool {
	return object(d, entryFields, func(i int) bool {
		switch i {
		case 0:
			return id(d, &e.ID)
		case 1:
			return id(d, &e.ConversationID)
		case 2:
			return str(d, &e.Kind)
		case 3:
			return id(d, &e.ByTaskID)
		case 4:
			return str(d, &e.Key)
		case 5:
			return raw(d, (*[]byte)(&e.Data))
		case 6:
			return messages(d, &e.Model)
		case 7:
			return id(d, &e.Head)
		}
		if d.Null() {
			return true
		}
		e.Edits = []storage.ContextEdit{}
		return d.Array(func() bool {
			var c storage.ContextEdit
			ok := object(d, editFields, func(i int) bool {
				switch i {
				case 0:
					return id(d, &c.Target)
				case 1:
					return str(d, &c.Action)
				}
				return messages(d, &c.Messages)
			})
			e.Edits = append(e.Edits, c)
			return ok
		})
	})
}

func readTask(d *jsonvalue.Decoder, t *storage.Task) bool {
	return object(d, taskFields, func(i int) bool {
		switch i {
		case 0:
			return id(d, &t.ID)
		case 1:
			return id(d, &t.ConversationID)
		case 2:
			return str(d, &t.Kind)
		case 3:
			return str(d, &t.Status)
		case 4:
			return str(d, &t.Role)
		case 5:
			return raw(d, (*[]byte)(&t.State))
		case 6:
			return ids(d, &t.After)
		case 7:
			return flag(d, &t.Background)
		case 8:
			return ids(d, &t.Owns)
		}
		return flag(d, &t.Abort)
	})
}
