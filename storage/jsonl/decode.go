package jsonl

import (
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// decodeLine is parseLine's fast path: it reads the lines Commit writes,
// and texts close to them, by hand, and gives up (false) on everything
// else, each key it does not know and each one given twice among them, so
// that encoding/json, strict as parseLine runs it, decides what such a
// line means or what is wrong with it. The tests hold the two to the same
// batches on every line the fast path takes. The writes are read into
// writes's array when it has the room (parseLine).
func decodeLine(text []byte, writes []storage.Write) (line, bool) {
	d := jsonvalue.NewDecoder(text)
	l := line{Writes: writes}
	ok := d.Members(lineFields, func(i int) bool {
		switch i {
		case 0:
			return jsonvalue.Int64Into(d, &l.First)
		case 1:
			return jsonvalue.Int64Into(d, &l.Task)
		}
		return jsonvalue.SliceIntoReusing(d, &l.Writes, func(w *storage.Write) bool {
			m := stateMerge{Index: len(l.Writes) - 1}
			ok := readWrite(d, w, &m)
			l.Merges = m.appendTo(l.Merges)
			return ok
		})
	})
	return l, ok && d.End()
}

var (
	lineFields         = jsonvalue.KnownFields("first", "task", "writes")
	writeFields        = jsonvalue.KnownFields("type", "addr", "value", "element", "conversation", "entry", "task", "id", "status", "role", "state", "abort", "owns", "stateMerge", "stateDrop")
	addressFields      = jsonvalue.KnownFields("scope", "namespace", "key", "rewind")
	conversationFields = jsonvalue.KnownFields("id", "parent", "owner")
	parentFields       = jsonvalue.KnownFields("conversationId", "at")
	entryFields        = jsonvalue.KnownFields("id", "conversationId", "kind", "byTaskId", "key", "data", "model", "head", "edits")
	editFields         = jsonvalue.KnownFields("target", "action", "messages")
	taskFields         = jsonvalue.KnownFields("id", "conversationId", "kind", "status", "role", "state", "after", "background", "owns", "abort")
)

// ids reads a list of identifiers; null leaves it as it is.
func ids(d *jsonvalue.Decoder, v *[]storage.ID) bool {
	return jsonvalue.SliceInto(d, v, func(n *storage.ID) bool { return jsonvalue.Int64Into(d, n) })
}

// messages reads model messages by the fast path of their UnmarshalJSON
// (ai.ReadMessage); where it gives up, so does the line's, and
// encoding/json calls UnmarshalJSON.
func messages(d *jsonvalue.Decoder, v *[]ai.Message) bool {
	return jsonvalue.SliceInto(d, v, func(m *ai.Message) bool { return ai.ReadMessage(d, m) })
}

// readWrite reads a write, and into m the merge its state is written as
// (merge.go), if it is.
func readWrite(d *jsonvalue.Decoder, w *storage.Write, m *stateMerge) bool {
	return d.Members(writeFields, func(i int) bool {
		switch i {
		case 0:
			return jsonvalue.StringInto(d, &w.Type)
		case 1:
			return jsonvalue.PointerInto(d, &w.Addr, func(v *storage.Address) bool { return readAddress(d, v) })
		case 2:
			return jsonvalue.RawInto(d, &w.Value)
		case 3:
			return jsonvalue.Int64Into(d, &w.Element)
		case 4:
			return jsonvalue.PointerInto(d, &w.Conversation, func(v *storage.Conversation) bool { return readConversation(d, v) })
		case 5:
			return jsonvalue.PointerInto(d, &w.Entry, func(v *storage.Entry) bool { return readEntry(d, v) })
		case 6:
			return jsonvalue.PointerInto(d, &w.Task, func(v *storage.Task) bool { return readTask(d, v) })
		case 7:
			return jsonvalue.Int64Into(d, &w.ID)
		case 8:
			return jsonvalue.StringInto(d, &w.Status)
		case 9:
			return jsonvalue.StringInto(d, &w.Role)
		case 10:
			return jsonvalue.RawInto(d, &w.State)
		case 11:
			return jsonvalue.BoolInto(d, &w.Abort)
		case 12:
			return ids(d, &w.Owns)
		case 13:
			return jsonvalue.RawInto(d, &m.Merge)
		}
		return jsonvalue.SliceInto(d, &m.Drop, func(k *string) bool { return jsonvalue.StringInto(d, k) })
	})
}

func readAddress(d *jsonvalue.Decoder, a *storage.Address) bool {
	return d.Members(addressFields, func(i int) bool {
		switch i {
		case 0:
			return readScope(d, &a.Scope)
		case 1:
			return jsonvalue.StringInto(d, &a.Namespace)
		case 2:
			return jsonvalue.StringInto(d, &a.Key)
		}
		return jsonvalue.BoolInto(d, &a.Rewind)
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
	return d.Members(conversationFields, func(i int) bool {
		switch i {
		case 0:
			return jsonvalue.Int64Into(d, &c.ID)
		case 1:
			return jsonvalue.PointerInto(d, &c.Parent, func(p *storage.ParentRef) bool {
				return d.Members(parentFields, func(i int) bool {
					if i == 0 {
						return jsonvalue.Int64Into(d, &p.ConversationID)
					}
					return jsonvalue.Int64Into(d, &p.At)
				})
			})
		}
		return jsonvalue.Int64Into(d, &c.Owner)
	})
}

func readEntry(d *jsonvalue.Decoder, e *storage.Entry) bool {
	return d.Members(entryFields, func(i int) bool {
		switch i {
		case 0:
			return jsonvalue.Int64Into(d, &e.ID)
		case 1:
			return jsonvalue.Int64Into(d, &e.ConversationID)
		case 2:
			return jsonvalue.StringInto(d, &e.Kind)
		case 3:
			return jsonvalue.Int64Into(d, &e.ByTaskID)
		case 4:
			return jsonvalue.StringInto(d, &e.Key)
		case 5:
			return jsonvalue.RawInto(d, &e.Data)
		case 6:
			return messages(d, &e.Model)
		case 7:
			return jsonvalue.Int64Into(d, &e.Head)
		}
		return jsonvalue.SliceInto(d, &e.Edits, func(c *storage.ContextEdit) bool {
			return d.Members(editFields, func(i int) bool {
				switch i {
				case 0:
					return jsonvalue.Int64Into(d, &c.Target)
				case 1:
					return jsonvalue.StringInto(d, &c.Action)
				}
				return messages(d, &c.Messages)
			})
		})
	})
}

func readTask(d *jsonvalue.Decoder, t *storage.Task) bool {
	return d.Members(taskFields, func(i int) bool {
		switch i {
		case 0:
			return jsonvalue.Int64Into(d, &t.ID)
		case 1:
			return jsonvalue.Int64Into(d, &t.ConversationID)
		case 2:
			return jsonvalue.StringInto(d, &t.Kind)
		case 3:
			return jsonvalue.StringInto(d, &t.Status)
		case 4:
			return jsonvalue.StringInto(d, &t.Role)
		case 5:
			return jsonvalue.RawInto(d, &t.State)
		case 6:
			if plant.On("jsonl-replay-drops-after") {
				var after []storage.ID
				return ids(d, &after)
			}
			return ids(d, &t.After)
		case 7:
			return jsonvalue.BoolInto(d, &t.Background)
		case 8:
			return ids(d, &t.Owns)
		}
		return jsonvalue.BoolInto(d, &t.Abort)
	})
}
