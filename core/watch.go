package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// ConversationView is what a client renders for one conversation (§9.4):
// captured on the line, then kept current by folding events with
// ApplyEvent. It is plain data: it needs no kinds, serializes to JSON and
// folds the same in another process.
type ConversationView struct {
	Conversation storage.Conversation `json:"conversation"`
	// Tail is how many of the newest entries Entries keeps.
	Tail    int              `json:"tail"`
	Entries []*storage.Entry `json:"entries"`
	// Context is the derived context, as entry ids.
	Context []storage.ID `json:"context"`
	// Tasks are the live tasks, in id order.
	Tasks []*storage.Task `json:"tasks"`
	// Inbox is the queued input, in admission order.
	Inbox []storage.Element `json:"inbox"`
	// Values are the values the registered kinds declare plus the requested
	// ones, by canonical address string (storage.Address.String).
	Values map[string]json.RawMessage `json:"values"`
	// Previews are the live tasks' previews, by task id.
	Previews map[storage.ID]any `json:"previews"`
	Faulted  bool               `json:"faulted"`
	ReadAt   storage.ID         `json:"readAt"`
}

// Conversation event types.
const (
	EventEntry      = "entry"
	EventTaskStart  = "task_start"
	EventTaskUpdate = "task_update"
	EventTaskEnd    = "task_end"
	EventTaskOutput = "task_output"
	EventValue      = "value"
	EventInbox      = "inbox"
	EventContext    = "context"
	EventFault      = "fault"
	EventClosed     = "closed"
)

// InboxOp is one change to the inbox: append, remove or clear.
type InboxOp struct {
	Type string           `json:"type"`
	Item *storage.Element `json:"item,omitempty"` // append
	ID   storage.ID       `json:"id,omitempty"`   // remove
}

// ConversationEvent is one change to a conversation view; Type selects the
// fields that are set. Events are proportional to their change; the view
// is authoritative and an event is a wake-up with a payload.
type ConversationEvent struct {
	Type     string         `json:"type"`
	Entry    *storage.Entry `json:"entry,omitempty"`    // entry
	Task     *storage.Task  `json:"task,omitempty"`     // task_start, task_update, task_end
	Previous *storage.Task  `json:"previous,omitempty"` // task_update
	// TaskID and Ops are a task_output: ops on the task's preview.
	TaskID storage.ID `json:"taskId,omitempty"`
	Ops    []delta.Op `json:"ops,omitempty"`
	// Addr and Value are a value event; Deleted says the value is gone.
	Addr    string          `json:"addr,omitempty"`
	Value   json.RawMessage `json:"value,omitempty"`
	Deleted bool            `json:"deleted,omitempty"`
	Inbox   []InboxOp       `json:"inbox,omitempty"` // inbox
	IDs     []storage.ID    `json:"ids,omitempty"`   // context
	Error   string          `json:"error,omitempty"` // fault
	// ReadAt is the last sequence of the commit the event belongs to.
	ReadAt storage.ID `json:"readAt,omitempty"`
}

// plantedTailSlack is 1 when the planted bug watch-tail-off-by-one is on.
func plantedTailSlack() int {
	if plant.On("watch-tail-off-by-one") {
		return 1
	}
	return 0
}

// ApplyEvent folds one event into a view. It needs no kinds and is what a
// client in another process runs on the same events. An event that does not
// fit the view (a task_output for a task it has no preview of, ops that do
// not apply) is an error and leaves the view unchanged.
func ApplyEvent(v *ConversationView, e ConversationEvent) error {
	switch e.Type {
	case EventEntry:
		if e.Entry == nil {
			return fmt.Errorf("core: entry event without an entry")
		}
		v.Entries = append(v.Entries, e.Entry)
		if tail := v.Tail; (tail > 0 || tail == 0 && !plant.On("watch-tail-zero-unbounded")) && len(v.Entries) > tail+plantedTailSlack() {
			v.Entries = slices.Clone(v.Entries[len(v.Entries)-tail:])
		}
		// A plain entry joins the context; a head or an edit comes with a
		// context event carrying the new ids.
		if !e.Entry.IsHead() && len(e.Entry.Edits) == 0 {
			v.Context = append(v.Context, e.Entry.ID)
		}
	case EventTaskStart, EventTaskUpdate:
		if e.Task == nil {
			return fmt.Errorf("core: %s event without a task", e.Type)
		}
		i, found := slices.BinarySearchFunc(v.Tasks, e.Task.ID, func(t *storage.Task, id storage.ID) int { return cmpID(t.ID, id) })
		if found {
			v.Tasks[i] = e.Task
		} else {
			v.Tasks = slices.Insert(v.Tasks, i, e.Task)
		}
	case EventTaskEnd:
		if e.Task == nil {
			return fmt.Errorf("core: task_end event without a task")
		}
		v.Tasks = slices.DeleteFunc(v.Tasks, func(t *storage.Task) bool { return t.ID == e.Task.ID })
		delete(v.Previews, e.Task.ID)
	case EventTaskOutput:
		next, err := delta.ApplyImmutable(v.Previews[e.TaskID], e.Ops)
		if err != nil {
			return fmt.Errorf("core: task_output of task %d: %w", e.TaskID, err)
		}
		if v.Previews == nil {
			v.Previews = map[storage.ID]any{}
		}
		v.Previews[e.TaskID] = next
	case EventValue:
		if v.Values == nil {
			v.Values = map[string]json.RawMessage{}
		}
		if e.Deleted {
			delete(v.Values, e.Addr)
		} else {
			v.Values[e.Addr] = e.Value
		}
	case EventInbox:
		// The ops fold into a copy, so an event with a bad op leaves the
		// view's inbox as it was.
		inbox := slices.Clone(v.Inbox)
		for i, op := range e.Inbox {
			switch op.Type {
			case "append":
				if op.Item == nil {
					return fmt.Errorf("core: inbox op %d: append without an item", i)
				}
				inbox = append(inbox, *op.Item)
			case "remove":
				inbox = slices.DeleteFunc(inbox, func(el storage.Element) bool { return el.ID == op.ID })
			case "clear":
				inbox = []storage.Element{} // as a fresh capture of an empty inbox
			default:
				return fmt.Errorf("core: inbox op %d: unknown op %q", i, op.Type)
			}
		}
		v.Inbox = inbox
	case EventContext:
		v.Context = slices.Clone(e.IDs)
	case EventFault:
		v.Faulted = true
	case EventClosed:
	default:
		return fmt.Errorf("core: unknown conversation event %q", e.Type)
	}
	if e.ReadAt > v.ReadAt {
		v.ReadAt = e.ReadAt
	}
	return nil
}

func cmpID(a, b storage.ID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// MarshalJSON writes the reference's shape for each event type: a
// task_output's "task" is the task id and its "ops" the delta ops; an
// inbox event's "ops" are inbox ops; a value event omits "value" when the
// value was deleted.
func (e ConversationEvent) MarshalJSON() ([]byte, error) {
	m := map[string]any{"type": e.Type}
	if e.ReadAt != 0 {
		m["readAt"] = e.ReadAt
	}
	switch e.Type {
	case EventEntry:
		m["entry"] = e.Entry
	case EventTaskStart, EventTaskEnd:
		m["task"] = e.Task
	case EventTaskUpdate:
		m["task"], m["previous"] = e.Task, e.Previous
	case EventTaskOutput:
		m["task"], m["ops"] = e.TaskID, e.Ops
	case EventValue:
		m["addr"] = e.Addr
		if !e.Deleted {
			m["value"] = e.Value
		}
	case EventInbox:
		m["ops"] = e.Inbox
	case EventContext:
		m["ids"] = e.IDs
	case EventFault:
		m["error"] = e.Error
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (e *ConversationEvent) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	var out ConversationEvent
	field := func(name string, into any) error {
		if r, ok := raw[name]; ok {
			if err := json.Unmarshal(r, into); err != nil {
				return fmt.Errorf("core: %s event: %s: %w", out.Type, name, err)
			}
		}
		return nil
	}
	if err := field("type", &out.Type); err != nil {
		return err
	}
	var errs []error
	errs = append(errs, field("readAt", &out.ReadAt))
	switch out.Type {
	case EventEntry:
		errs = append(errs, field("entry", &out.Entry))
	case EventTaskStart, EventTaskEnd, EventTaskUpdate:
		errs = append(errs, field("task", &out.Task), field("previous", &out.Previous))
	case EventTaskOutput:
		errs = append(errs, field("task", &out.TaskID), field("ops", &out.Ops))
	case EventValue:
		errs = append(errs, field("addr", &out.Addr))
		if v, ok := raw["value"]; ok {
			out.Value = slices.Clone(v)
		} else {
			out.Deleted = true
		}
	case EventInbox:
		errs = append(errs, field("ops", &out.Inbox))
	case EventContext:
		errs = append(errs, field("ids", &out.IDs))
	case EventFault:
		errs = append(errs, field("error", &out.Error))
	case EventClosed:
	default:
		return fmt.Errorf("core: unknown conversation event %q", out.Type)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	*e = out
	return nil
}
