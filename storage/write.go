package storage

import "encoding/json"

// WriteType discriminates the writes of a batch (reference §7.3).
type WriteType string

const (
	WriteValueSet           WriteType = "value.set"
	WriteValueDelete        WriteType = "value.delete"
	WriteListAppend         WriteType = "list.append"
	WriteListRemove         WriteType = "list.remove"
	WriteListClear          WriteType = "list.clear"
	WriteCreateConversation WriteType = "createConversation"
	WriteDeleteConversation WriteType = "deleteConversation"
	WriteEntry              WriteType = "entry"
	WriteTask               WriteType = "task"
	WritePatch              WriteType = "patch"
	WriteSettle             WriteType = "settle"
)

// IsState reports whether the write is a state write (allowed in scratch).
func (t WriteType) IsState() bool {
	switch t {
	case WriteValueSet, WriteValueDelete, WriteListAppend, WriteListRemove, WriteListClear:
		return true
	}
	return false
}

// Write is one write of a batch. Type selects the meaningful fields:
//
//	value.set          Addr, Value
//	value.delete       Addr
//	list.append        Addr, Value (the element id is the write's sequence)
//	list.remove        Addr, Element
//	list.clear         Addr
//	createConversation Conversation
//	deleteConversation ID
//	entry              Entry
//	task               Task
//	patch              ID, and any of Status+Role, State, Abort, Owns
//	settle             ID, Status, Role (terminal), State; retires the task's scratch
//
// Patch and settle carry the task's complete new state, not a difference, so
// a write can be applied without reading the old record (a JSONL file may
// hold the state as a difference; its reader rebuilds the whole). Owns on a patch is
// the complete new list; it is how a running task records a conversation it
// created (reference §5.7), which the reference's patch shape leaves implicit.
type Write struct {
	Type         WriteType       `json:"type"`
	Addr         *Address        `json:"addr,omitempty"`
	Value        json.RawMessage `json:"value,omitempty"`
	Element      ID              `json:"element,omitempty"`
	Conversation *Conversation   `json:"conversation,omitempty"`
	Entry        *Entry          `json:"entry,omitempty"`
	Task         *Task           `json:"task,omitempty"`
	ID           ID              `json:"id,omitempty"`
	Status       string          `json:"status,omitempty"`
	Role         TaskRole        `json:"role,omitempty"`
	State        json.RawMessage `json:"state,omitempty"`
	Abort        bool            `json:"abort,omitempty"`
	Owns         []ID            `json:"owns,omitempty"`
}

// BatchKind says whether a batch is a main commit or one task's scratch commit.
type BatchKind string

const (
	BatchMain    BatchKind = "main"
	BatchScratch BatchKind = "scratch"
)

// CommitBatch is one atomic commit. Write i gets sequence LastSeq+1+i. A
// scratch batch carries only state writes to the scratch scope of Task; a main
// batch never writes scratch.
type CommitBatch struct {
	Kind   BatchKind `json:"kind"`
	Task   ID        `json:"task,omitempty"`
	Writes []Write   `json:"writes"`
}
