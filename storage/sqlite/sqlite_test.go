package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/sqlite"
	"github.com/pico-go/pico/storage/storagetest"
)

type ID = storage.ID

func open(t *testing.T, path, session string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{Session: session})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStorage(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Storage {
		return open(t, filepath.Join(t.TempDir(), "s.db"), "s1")
	})
}

// reopening closes and reopens the database after every commit, so the whole
// suite also checks that everything a read needs is in the file.
type reopening struct {
	*sqlite.Store
	path string
}

func (r *reopening) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	rng, err := r.Store.Commit(ctx, b)
	if err != nil {
		return rng, err
	}
	if err := r.Store.Close(ctx); err != nil {
		return rng, err
	}
	s, err := sqlite.Open(ctx, r.path, sqlite.Options{Session: "s1"})
	if err != nil {
		return rng, err
	}
	r.Store = s
	return rng, nil
}

func TestStorageReopenedAfterEveryCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("reopens the database after every commit")
	}
	storagetest.Run(t, func(t *testing.T) storage.Storage {
		path := filepath.Join(t.TempDir(), "s.db")
		return &reopening{Store: open(t, path, "s1"), path: path}
	})
}

// againstTheFile checks, after every commit (refused ones too), that what
// the store answers from its memo of commits is what the file says: a
// read-only store on the same file, which keeps no memo, answers the same
// reads of every conversation and task the batches named, and of the
// values and lists this batch named (every one any batch named, each
// tenth commit: a deep fork chain makes them slow to read).
type againstTheFile struct {
	*sqlite.Store
	t       *testing.T
	path    string
	commits int
	ids     map[ID]bool
	addrs   map[string]storage.Address
}

func (c *againstTheFile) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	rng, err := c.Store.Commit(ctx, b)
	named := map[string]storage.Address{}
	for _, w := range b.Writes {
		for _, id := range []ID{w.ID, w.Element} {
			c.ids[id] = true
		}
		if w.Conversation != nil {
			c.ids[w.Conversation.ID] = true
		}
		if w.Task != nil {
			c.ids[w.Task.ID] = true
		}
		if w.Addr != nil {
			c.addrs[w.Addr.StateKey()] = *w.Addr
			named[w.Addr.StateKey()] = *w.Addr
		}
	}
	if c.commits++; c.commits%10 == 0 {
		named = c.addrs
	}
	if !errors.Is(err, storage.ErrClosed) {
		c.compare(ctx, named)
	}
	return rng, err
}

func (c *againstTheFile) compare(ctx context.Context, addrs map[string]storage.Address) {
	c.t.Helper()
	ro, err := sqlite.Open(ctx, c.path, sqlite.Options{Session: "s1", ReadOnly: true})
	if err != nil {
		c.t.Fatal(err)
	}
	defer ro.Close(ctx)
	ids := []ID{c.Store.LastSeq() + 1}
	for id := range c.ids {
		ids = append(ids, id)
	}
	type answer struct {
		Convs map[ID]storage.Conversation
		Tasks map[ID]*storage.Task
		Value []any
	}
	read := func(s storage.Storage) answer {
		var a answer
		var err error
		if a.Convs, err = s.GetConversations(ctx, ids); err != nil {
			c.t.Fatal(err)
		}
		if a.Tasks, err = s.GetTasks(ctx, ids); err != nil {
			c.t.Fatal(err)
		}
		for _, key := range slices.Sorted(maps.Keys(addrs)) {
			addr := addrs[key]
			v, ok, err := s.GetValue(ctx, addr, 0)
			l, lerr := s.ReadList(ctx, addr, storage.ListQuery{Cursor: storage.Cursor{Limit: 100}})
			a.Value = append(a.Value, addr.StateKey(), v, ok, fmt.Sprint(err), l, fmt.Sprint(lerr))
		}
		return a
	}
	if diff := cmp.Diff(read(ro), read(c.Store)); diff != "" {
		c.t.Fatalf("after commit %d the store answers otherwise than its file (-file +store):\n%s", c.Store.LastSeq(), diff)
	}
}

func TestStorageAnswersAsItsFileDoes(t *testing.T) {
	if testing.Short() {
		t.Skip("reads everything the batches named after every commit")
	}
	storagetest.Run(t, func(t *testing.T) storage.Storage {
		path := filepath.Join(t.TempDir(), "s.db")
		return &againstTheFile{Store: open(t, path, "s1"), t: t, path: path, ids: map[ID]bool{}, addrs: map[string]storage.Address{}}
	})
}

func TestVersionMismatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	open(t, path, "s1").Close(context.Background())
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE session_metadata SET value='99' WHERE session='s1' AND key='version'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = sqlite.Open(context.Background(), path, sqlite.Options{Session: "s1"})
	var ve *sqlite.VersionError
	if !errors.As(err, &ve) || ve.Found != "99" || ve.Wanted != sqlite.StorageVersion {
		t.Fatalf("open = %v; want a VersionError found 99 wanted %s", err, sqlite.StorageVersion)
	}
	if _, err := sqlite.Open(context.Background(), path, sqlite.Options{}); err == nil {
		t.Fatal("open without a session succeeded")
	}
}

func raw(v any) json.RawMessage { b, _ := json.Marshal(v); return b }

func TestSessionsShareAFileInIsolation(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	a, b := open(t, path, "a"), open(t, path, "b")
	defer a.Close(ctx)
	defer b.Close(ctx)
	val := storage.SessionValue[int]("n").Address
	list := storage.ConversationList[int]("l", storage.Rewind).In(1).Address
	for i, s := range []*sqlite.Store{a, b} {
		_, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
			{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
			{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 2, ConversationID: 1, Kind: []string{"ka", "kb"}[i]}},
			{Type: storage.WriteValueSet, Addr: &val, Value: raw(i)},
			{Type: storage.WriteListAppend, Addr: &list, Value: raw(i)},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteTask, Task: &storage.Task{ID: 5, ConversationID: 1, Kind: "k", Status: "s", Role: storage.RoleStart}},
	}}); err != nil {
		t.Fatal(err)
	}
	if a.LastSeq() != 5 || b.LastSeq() != 4 {
		t.Fatalf("lastSeq a=%d b=%d; want 5, 4", a.LastSeq(), b.LastSeq())
	}
	for i, s := range []*sqlite.Store{a, b} {
		kinds, err := s.EntryKinds(ctx)
		if err != nil || len(kinds) != 1 || kinds[0] != []string{"ka", "kb"}[i] {
			t.Errorf("session %d kinds = %v, %v", i, kinds, err)
		}
		v, ok, err := s.GetValue(ctx, val, 0)
		if err != nil || !ok || string(v.Value) != string(raw(i)) {
			t.Errorf("session %d value = %s, %v, %v", i, v.Value, ok, err)
		}
		l, err := s.ReadList(ctx, list, storage.ListQuery{Cursor: storage.Cursor{Limit: 10}})
		if err != nil || len(l.Items) != 1 || string(l.Items[0].Value) != string(raw(i)) {
			t.Errorf("session %d list = %v, %v", i, l.Items, err)
		}
		tasks, err := s.ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: 10}})
		if err != nil || len(tasks.Items) != 1-i {
			t.Errorf("session %d tasks = %v, %v", i, tasks.Items, err)
		}
	}
	// Reopened sessions keep their own sequences, whichever opens first
	// (a's row comes first in the file), and the next commit of each
	// numbers on from its own.
	a.Close(ctx)
	b.Close(ctx)
	last := map[string]ID{"a": 5, "b": 4}
	for _, order := range [][]string{{"b", "a"}, {"a", "b"}} {
		for _, name := range order {
			s := open(t, path, name)
			if got := s.LastSeq(); got != last[name] {
				t.Fatalf("reopened %s: lastSeq %d; want %d", name, got, last[name])
			}
			r, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
				{Type: storage.WriteEntry, Entry: &storage.Entry{ID: last[name] + 1, ConversationID: 1, Kind: "k"}},
			}})
			if err != nil || r.First != last[name]+1 {
				t.Fatalf("reopened %s: the next commit lands at %d, %v; want %d", name, r.First, err, last[name]+1)
			}
			last[name]++
			s.Close(ctx)
		}
	}
}
