package storagetest

import (
	"encoding/json"
	"errors"

	"github.com/pico-go/pico/storage"
)

// tx builds one batch the way the harness's Tx does: it reads LastSeq when
// it starts and numbers every write from there, so a write's builder method
// returns the id the write will get.
type tx struct {
	s         *store
	kind      storage.BatchKind
	batchTask ID // the task of a scratch batch
	first     ID
	writes    []storage.Write
}

// tx starts a main batch.
func (s *store) tx() *tx {
	return &tx{s: s, kind: storage.BatchMain, first: s.LastSeq() + 1}
}

// scratchTx starts a scratch batch of one task.
func (s *store) scratchTx(task ID) *tx {
	return &tx{s: s, kind: storage.BatchScratch, batchTask: task, first: s.LastSeq() + 1}
}

// next is the sequence the next write will get.
func (x *tx) next() ID { return x.first + ID(len(x.writes)) }

// add appends a write and returns its sequence.
func (x *tx) add(w storage.Write) ID {
	seq := x.next()
	x.writes = append(x.writes, w)
	return seq
}

func (x *tx) batch() storage.CommitBatch {
	return storage.CommitBatch{Kind: x.kind, Task: x.batchTask, Writes: x.writes}
}

// commit commits the batch and fails the test unless it gets exactly the
// sequences it was numbered with.
func (x *tx) commit() storage.Range {
	x.s.t.Helper()
	r, err := x.s.Commit(x.s.ctx, x.batch())
	if err != nil {
		x.s.t.Fatalf("Commit: %v", err)
	}
	want := storage.Range{First: x.first, Last: x.next() - 1}
	if r != want {
		x.s.t.Fatalf("Commit range = %+v; want %+v", r, want)
	}
	if got := x.s.LastSeq(); got != want.Last {
		x.s.t.Fatalf("LastSeq() after commit = %d; want %d", got, want.Last)
	}
	return r
}

// reject commits the batch, expects a *storage.BatchError and returns it.
func (x *tx) reject() *storage.BatchError {
	x.s.t.Helper()
	_, err := x.s.Commit(x.s.ctx, x.batch())
	var be *storage.BatchError
	if !errors.As(err, &be) {
		x.s.t.Fatalf("Commit error = %v; want a *storage.BatchError", err)
	}
	return be
}

// padTo adds filler writes (session values) until the next write gets seq.
func (x *tx) padTo(seq ID) *tx {
	x.s.t.Helper()
	if x.next() > seq {
		x.s.t.Fatalf("padTo(%d): the next write already gets %d", seq, x.next())
	}
	for x.next() < seq {
		x.filler()
	}
	return x
}

var fillerAddr = storage.SessionValue[int]("storagetest.filler").Address

// filler adds a write that touches nothing the tests read.
func (x *tx) filler() ID { return x.set(fillerAddr, int(x.next())) }

func (x *tx) conversation() ID {
	return x.add(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: x.next()}})
}

func (x *tx) fork(parent, at ID) ID {
	return x.add(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{
		ID: x.next(), Parent: &storage.ParentRef{ConversationID: parent, At: at},
	}})
}

// ownedConversation creates a conversation whose owner is a task.
func (x *tx) ownedConversation(owner ID) ID {
	return x.add(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: x.next(), Owner: owner}})
}

func (x *tx) deleteConversation(id ID) ID {
	return x.add(storage.Write{Type: storage.WriteDeleteConversation, ID: id})
}

// entry appends an entry of a kind with no other facets.
func (x *tx) entry(conv ID, kind string) ID {
	return x.entryWith(storage.Entry{ConversationID: conv, Kind: kind})
}

// head appends an entry that starts a context at head.
func (x *tx) head(conv ID, kind string, head ID) ID {
	return x.entryWith(storage.Entry{ConversationID: conv, Kind: kind, Head: head})
}

// entryWith appends e with its id set to its sequence.
func (x *tx) entryWith(e storage.Entry) ID {
	e.ID = x.next()
	return x.add(storage.Write{Type: storage.WriteEntry, Entry: &e})
}

// task creates a live task in the start role.
func (x *tx) task(conv ID, kind string) ID {
	return x.taskWith(storage.Task{ConversationID: conv, Kind: kind, Status: "pending", Role: storage.RoleStart})
}

// taskWith creates t with its id set to its sequence.
func (x *tx) taskWith(t storage.Task) ID {
	t.ID = x.next()
	return x.add(storage.Write{Type: storage.WriteTask, Task: &t})
}

func (x *tx) patch(id ID, status string, role storage.TaskRole) ID {
	return x.add(storage.Write{Type: storage.WritePatch, ID: id, Status: status, Role: role})
}

// markAbort patches only the task's durable cancellation mark.
func (x *tx) markAbort(id ID) ID {
	return x.add(storage.Write{Type: storage.WritePatch, ID: id, Abort: true})
}

func (x *tx) settle(id ID, status string) ID {
	return x.add(storage.Write{Type: storage.WriteSettle, ID: id, Status: status, Role: storage.RoleTerminal, State: js(status)})
}

func (x *tx) set(a storage.Address, v any) ID {
	return x.add(storage.Write{Type: storage.WriteValueSet, Addr: addrPtr(a), Value: js(v)})
}

func (x *tx) del(a storage.Address) ID {
	return x.add(storage.Write{Type: storage.WriteValueDelete, Addr: addrPtr(a)})
}

// push appends an element to a list and returns the element's id.
func (x *tx) push(a storage.Address, v any) ID {
	return x.add(storage.Write{Type: storage.WriteListAppend, Addr: addrPtr(a), Value: js(v)})
}

func (x *tx) remove(a storage.Address, element ID) ID {
	return x.add(storage.Write{Type: storage.WriteListRemove, Addr: addrPtr(a), Element: element})
}

func (x *tx) clear(a storage.Address) ID {
	return x.add(storage.Write{Type: storage.WriteListClear, Addr: addrPtr(a)})
}

func addrPtr(a storage.Address) *storage.Address { return &a }

// js encodes a test value; the suite only encodes values that can be encoded.
func js(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("storagetest: cannot encode a test value: " + err.Error())
	}
	return b
}
