package jsonl_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/storagetest"
)

func TestStorage(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Storage {
		s, err := jsonl.Open(context.Background(), filepath.Join(t.TempDir(), "s.jsonl"), jsonl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

type ID = storage.ID

func open(t *testing.T, path string) *jsonl.Store {
	t.Helper()
	s, err := jsonl.Open(context.Background(), path, jsonl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func commit(t *testing.T, s storage.Storage, b storage.CommitBatch) storage.Range {
	t.Helper()
	r, err := s.Commit(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var (
	moves  = storage.ConversationList[string]("game.moves", storage.Rewind).In(1).Address
	frames = func(task ID) storage.Address { return storage.ScratchList[string]("frames").In(task).Address }
)

func raw(v any) json.RawMessage { b, _ := json.Marshal(v); return b }

// session writes a conversation (1), a live task (2), entries and list
// elements, and n scratch frames for the task.
func session(t *testing.T, s storage.Storage, frameCount int) {
	t.Helper()
	commit(t, s, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		{Type: storage.WriteTask, Task: &storage.Task{ID: 2, ConversationID: 1, Kind: "generation", Status: "streaming", Role: storage.RoleInflight}},
		{Type: storage.WriteListAppend, Addr: &moves, Value: raw("e4")},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 4, ConversationID: 1, Kind: "user", Data: raw(map[string]int{"n": 1})}},
	}})
	for i := range frameCount {
		f := frames(2)
		commit(t, s, storage.CommitBatch{Kind: storage.BatchScratch, Task: 2, Writes: []storage.Write{{Type: storage.WriteListAppend, Addr: &f, Value: raw(i)}}})
	}
}

func view(t *testing.T, s storage.Storage) string {
	t.Helper()
	ctx := context.Background()
	lim := storage.Cursor{Limit: 1000}
	e, err1 := s.ScanEntries(ctx, storage.EntryQuery{Cursor: lim, ConversationID: 1})
	tk, err2 := s.ScanTasks(ctx, storage.TaskQuery{Cursor: lim})
	l, err3 := s.ReadList(ctx, moves, storage.ListQuery{Cursor: lim})
	f, err4 := s.ReadList(ctx, frames(2), storage.ListQuery{Cursor: lim})
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal([]any{s.LastSeq(), e.Items, tk.Items, l.Items, f.Items})
	return string(out)
}

func TestReopenReplaysMainThenLiveScratch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := open(t, path)
	session(t, s, 146) // main 1–4, scratch 5–150
	want := view(t, s)
	s.Close(context.Background())
	r := open(t, path)
	if got := view(t, r); got != want {
		t.Fatalf("reopened state differs:\n%s", cmp.Diff(want, got))
	}
	if r.LastSeq() != 150 {
		t.Fatalf("lastSeq = %d; want 150 (the live scratch's endpoint)", r.LastSeq())
	}
	next := commit(t, r, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteSettle, ID: 2, Status: "done", Role: storage.RoleTerminal, State: raw(map[string]any{})}}})
	if next.First != 151 {
		t.Fatalf("next write = %d; want 151", next.First)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "s.scratch", "2")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("settled task's scratch file: %v; want it unlinked", err)
	}
}

func TestRetiredScratchIsIgnoredEvenIfMalformed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := open(t, path)
	session(t, s, 3)
	scratch := filepath.Join(filepath.Dir(path), "s.scratch", "2")
	saved, _ := os.ReadFile(scratch)
	commit(t, s, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteSettle, ID: 2, Status: "done", Role: storage.RoleTerminal}}})
	s.Close(context.Background())
	// The unlink "failed": the retired file is back, and garbage follows.
	os.WriteFile(scratch, append(saved, []byte("{not json}\n")...), 0o600)
	r := open(t, path)
	if r.LastSeq() != 8 {
		t.Fatalf("lastSeq = %d; want 8 (the settlement covers the retired sequences)", r.LastSeq())
	}
	p, err := r.ReadList(context.Background(), frames(2), storage.ListQuery{Cursor: storage.Cursor{Limit: 10}})
	if err != nil || len(p.Items) != 0 {
		t.Fatalf("retired scratch visible: %v, %v", p.Items, err)
	}
}

func TestTornFinalLineIsDiscardedAndCut(t *testing.T) {
	for _, file := range []string{"main", "scratch"} {
		t.Run(file, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.jsonl")
			s := open(t, path)
			session(t, s, 2)
			want := view(t, s)
			s.Close(context.Background())
			target := path
			if file == "scratch" {
				target = filepath.Join(filepath.Dir(path), "s.scratch", "2")
			}
			f, _ := os.OpenFile(target, os.O_WRONLY|os.O_APPEND, 0o600)
			f.WriteString(`{"first":7,"writes":[{"type":"li`)
			f.Close()
			r := open(t, path)
			if got := view(t, r); got != want {
				t.Fatalf("state after a torn line:\n%s", cmp.Diff(want, got))
			}
			data, _ := os.ReadFile(target)
			if !strings.HasSuffix(string(data), "\n") {
				t.Fatal("the torn suffix was not cut from the file")
			}
			commit(t, r, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 7, ConversationID: 1, Kind: "user"}}}})
			r.Close(context.Background())
			if got := open(t, path).LastSeq(); got != 7 {
				t.Fatalf("lastSeq after appending past a cut line = %d; want 7", got)
			}
		})
	}
}

func TestMalformedCompleteLineFailsOpenNamingFileAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := open(t, path)
	session(t, s, 0)
	commit(t, s, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 5, ConversationID: 1, Kind: "user"}}}})
	s.Close(context.Background())
	data, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(data), "\n")
	for name, corrupt := range map[string]string{
		"garbage":       "{oops}\n",
		"unknown field": `{"first":5,"writes":[],"extra":1}` + "\n",
		"reordered":     `{"first":2,"writes":[{"type":"entry","entry":{"id":2,"conversationId":1,"kind":"user"}}]}` + "\n",
		"bad write":     `{"first":5,"writes":[{"type":"entry","entry":{"id":5,"conversationId":9,"kind":"user"}}]}` + "\n",
	} {
		os.WriteFile(path, []byte(lines[0]+corrupt), 0o600)
		_, err := jsonl.Open(context.Background(), path, jsonl.Options{})
		var fe *jsonl.FileError
		if !errors.As(err, &fe) || fe.Line != 2 || fe.Path != path {
			t.Errorf("%s: open = %v; want a FileError naming %s line 2", name, err, path)
		}
		after, _ := os.ReadFile(path)
		if string(after) != lines[0]+corrupt {
			t.Errorf("%s: open rewrote the file", name)
		}
	}
}

func TestFilesArePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := open(t, path)
	session(t, s, 1)
	for _, p := range []string{path, filepath.Join(filepath.Dir(path), "s.scratch", "2")} {
		info, err := os.Stat(p)
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, %v; want 0600", p, info.Mode().Perm(), err)
		}
	}
}

// reopening reopens its session from disk after every commit, so the whole
// backend suite also checks that replay reproduces exactly what memory had.
type reopening struct {
	*jsonl.Store
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
	s, err := jsonl.Open(ctx, r.path, jsonl.Options{})
	if err != nil {
		return rng, err
	}
	r.Store = s
	return rng, nil
}

func TestStorageReopenedAfterEveryCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the session after every commit")
	}
	storagetest.Run(t, func(t *testing.T) storage.Storage {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		return &reopening{Store: open(t, path), path: path}
	})
}

// Verify sees every batch of the replay before it is applied, with the
// session as it stood before the batch; its error fails the open naming the
// file and line, and the file is left as it was.
func TestVerifyRunsOnEveryReplayedBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := open(t, path)
	session(t, s, 0)
	for id := storage.ID(5); id <= 7; id++ {
		commit(t, s, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteEntry, Entry: &storage.Entry{ID: id, ConversationID: 1, Kind: "user"}}}})
	}
	s.Close(context.Background())
	before, _ := os.ReadFile(path)
	var seen []storage.ID // the last sequence before each batch
	refuse := errors.New("entry 6 is not allowed")
	_, err := jsonl.Open(context.Background(), path, jsonl.Options{Verify: func(_ context.Context, st storage.Storage, b storage.CommitBatch) error {
		seen = append(seen, st.LastSeq())
		if b.Writes[0].Entry != nil && b.Writes[0].Entry.ID == 6 {
			return refuse
		}
		return nil
	}})
	var fe *jsonl.FileError
	if !errors.As(err, &fe) || fe.Path != path || fe.Line != 4 || !errors.Is(err, refuse) {
		t.Fatalf("open = %v; want a FileError naming %s line 4 (after the header) wrapping the verifier's error", err, path)
	}
	if diff := cmp.Diff([]storage.ID{0, 4, 5}, seen); diff != "" {
		t.Fatalf("the session's last sequence before each verified batch (-want +got):\n%s", diff)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("a refused open rewrote the file")
	}
}
