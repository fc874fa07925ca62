package storage

import (
	"encoding/json"
	"strconv"

	"github.com/pico-go/pico/core/ai"
)

// ID is a position in the session-wide sequence. Every write of every commit
// gets the next one; a creation's sequence number is the object's id. Valid
// ids are positive; the zero ID means "none".
type ID int64

// String formats the id as a decimal number.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// ParentRef says which conversation a fork was taken from, and at which entry.
//
// At is the last inherited entry of the source's logical transcript; 0 is
// the start of it: the fork inherits no entry and no rewindable state,
// only its provenance.
type ParentRef struct {
	ConversationID ID `json:"conversationId"`
	At             ID `json:"at"`
}

// Conversation is the record of one conversation. Parent is fork provenance
// (history); Owner is the task that created it (ownership). They are
// independent relationships.
type Conversation struct {
	ID     ID         `json:"id"`
	Parent *ParentRef `json:"parent,omitempty"`
	Owner  ID         `json:"owner,omitempty"`
}

// EditAction is what a context edit does to its target.
type EditAction string

const (
	EditOmit    EditAction = "omit"
	EditReplace EditAction = "replace"
)

// ContextEdit omits or replaces the model projection of an earlier entry.
type ContextEdit struct {
	Target   ID           `json:"target"`
	Action   EditAction   `json:"action"`
	Messages []ai.Message `json:"messages,omitempty"`
}

// Entry is one immutable transcript entry. The facets combine freely: Data
// (kind-specific JSON, never model input), Model (the provider-neutral
// messages materialized at append), Head (the inclusive first retained entry
// of the context this entry starts; zero when the entry is no head) and Edits.
// Key is an optional indexed key (for example the tool call a result answers);
// ByTaskID names the task that wrote it.
type Entry struct {
	ID             ID              `json:"id"`
	ConversationID ID              `json:"conversationId"`
	Kind           string          `json:"kind"`
	ByTaskID       ID              `json:"byTaskId,omitempty"`
	Key            string          `json:"key,omitempty"`
	Data           json.RawMessage `json:"data,omitempty"`
	Model          []ai.Message    `json:"model,omitempty"`
	Head           ID              `json:"head,omitempty"`
	Edits          []ContextEdit   `json:"edits,omitempty"`
}

// IsHead reports whether the entry stores a context boundary.
func (e *Entry) IsHead() bool { return e.Head != 0 }

// TaskRole is what the driver may do with a task in a given status. A kind
// maps each of its statuses to one role; the role is stored with every write.
type TaskRole string

const (
	RoleStart    TaskRole = "start"    // the driver may call execute
	RoleInflight TaskRole = "inflight" // intent was committed; call recover
	RoleTerminal TaskRole = "terminal" // done; never patched again
)

// Valid reports whether r is one of the three roles.
func (r TaskRole) Valid() bool {
	return r == RoleStart || r == RoleInflight || r == RoleTerminal
}

// Task is the record of durable work belonging to one conversation.
type Task struct {
	ID             ID              `json:"id"`
	ConversationID ID              `json:"conversationId"`
	Kind           string          `json:"kind"`
	Status         string          `json:"status"`
	Role           TaskRole        `json:"role"`
	State          json.RawMessage `json:"state,omitempty"`
	After          []ID            `json:"after,omitempty"`
	Background     bool            `json:"background,omitempty"`
	Owns           []ID            `json:"owns,omitempty"`
	Abort          bool            `json:"abort,omitempty"`
}

// Live reports whether the task is not terminal.
func (t *Task) Live() bool { return t.Role != RoleTerminal }

// Version is one stored version of a value: the sequence that wrote it and
// the value (JSON).
type Version struct {
	Seq   ID              `json:"seq"`
	Value json.RawMessage `json:"value"`
}

// Element is one list element; its id is the sequence of its append.
type Element struct {
	ID    ID              `json:"id"`
	Value json.RawMessage `json:"value"`
}

// KeyedVersion is one row of a value scan.
type KeyedVersion struct {
	Key     string  `json:"key"`
	Version Version `json:"version"`
}

// Range is the sequence range a commit was given, inclusive. An empty commit
// gets First = Last+1.
type Range struct {
	First ID `json:"first"`
	Last  ID `json:"last"`
}
