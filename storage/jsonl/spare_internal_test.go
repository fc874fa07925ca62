package jsonl

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pico-go/pico/storage"
)

// spareSession is a session with conversation 1 and tasks whose scratch
// the tests write and settle.
type spareSession struct {
	t    *testing.T
	path string
	s    *Store
}

func newSpareSession(t *testing.T) *spareSession {
	t.Helper()
	x := &spareSession{t: t, path: filepath.Join(t.TempDir(), "s.jsonl")}
	s, err := Open(context.Background(), x.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	x.s = s
	x.commit(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}})
	return x
}

func (x *spareSession) commit(b storage.CommitBatch) storage.Range {
	x.t.Helper()
	r, err := x.s.Commit(context.Background(), b)
	if err != nil {
		x.t.Fatalf("commit: %v", err)
	}
	return r
}

// task creates a live task and returns its id.
func (x *spareSession) task() storage.ID {
	id := x.s.LastSeq() + 1
	x.commit(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteTask, Task: &storage.Task{ID: id, ConversationID: 1, Kind: "k", Status: "s", Role: storage.RoleInflight}}}})
	return id
}

func (x *spareSession) frame(task storage.ID, v string) {
	addr := storage.Address{Scope: storage.ScratchScope(task), Namespace: "f"}
	x.commit(storage.CommitBatch{Kind: storage.BatchScratch, Task: task, Writes: []storage.Write{{Type: storage.WriteListAppend, Addr: &addr, Value: json.RawMessage(v)}}})
}

func (x *spareSession) settle(task storage.ID) {
	x.commit(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteSettle, ID: task, Status: "done", Role: storage.RoleTerminal}}})
}

// files lists the scratch directory: name → size.
func (x *spareSession) files() map[string]int64 {
	x.t.Helper()
	out := map[string]int64{}
	names, err := os.ReadDir(x.s.scratchDir)
	if err != nil {
		x.t.Fatal(err)
	}
	for _, n := range names {
		info, err := n.Info()
		if err != nil {
			x.t.Fatal(err)
		}
		out[n.Name()] = info.Size()
	}
	return out
}

func stat(t *testing.T, path string) fs.FileInfo {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// frames reads a task's scratch frames from a store.
func framesOf(t *testing.T, s *Store, task storage.ID) []string {
	t.Helper()
	page, err := s.ReadList(context.Background(), storage.Address{Scope: storage.ScratchScope(task), Namespace: "f"}, storage.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range page.Items {
		out = append(out, string(e.Value))
	}
	return out
}

// A settled task's scratch file is emptied and kept, and the next task's
// first scratch write takes it by renaming: the same file, now the new
// task's, holding only its header and batch.
func TestASettledTasksScratchFileIsTakenByTheNextTask(t *testing.T) {
	x := newSpareSession(t)
	a := x.task()
	x.frame(a, `"a1"`)
	x.frame(a, `"a2"`)
	fileA := stat(t, x.s.scratchFile(a))
	x.settle(a)
	if got := x.files(); len(got) != 1 || got[a.String()] != 0 {
		t.Fatalf("scratch files after the settle = %v; want task %d's, emptied", got, a)
	}
	b := x.task()
	x.frame(b, `"b1"`)
	if got := x.files(); len(got) != 1 || got[b.String()] == 0 {
		t.Fatalf("scratch files after the next task's first frame = %v; want only task %d's", got, b)
	}
	if !os.SameFile(fileA, stat(t, x.s.scratchFile(b))) {
		t.Fatalf("task %d's scratch is a new file; want the settled task's, renamed", b)
	}
	x.frame(b, `"b2"`)
	if err := x.s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err := Open(context.Background(), x.path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer r.Close(context.Background())
	if got := framesOf(t, r, b); !slices.Equal(got, []string{`"b1"`, `"b2"`}) {
		t.Fatalf("task %d's frames after reopening = %v; want [b1 b2]", b, got)
	}
}

// Close removes the spares; at most scratchSparesMax are kept, the other
// retired files are unlinked at once.
func TestSparesAreBoundedAndCloseRemovesThem(t *testing.T) {
	x := newSpareSession(t)
	var tasks []storage.ID
	for range scratchSparesMax + 3 {
		id := x.task()
		x.frame(id, `1`)
		tasks = append(tasks, id)
	}
	for _, id := range tasks {
		x.settle(id)
	}
	if got := len(x.files()); got != scratchSparesMax {
		t.Fatalf("%d files after %d settles; want the %d spares", got, len(tasks), scratchSparesMax)
	}
	if err := x.s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(x.s.scratchDir)
	if err != nil || len(names) != 0 {
		t.Fatalf("scratch directory after Close: %d files, %v; want none", len(names), err)
	}
}

// A process that dies with spares leaves emptied files of settled tasks:
// open removes them, and the session reads as it was.
func TestOpenRemovesTheSparesACrashLeft(t *testing.T) {
	x := newSpareSession(t)
	a, b := x.task(), x.task()
	x.frame(a, `1`)
	x.frame(b, `2`)
	x.settle(a)
	// The files as the dying process leaves them: copied before its store
	// closes (which would remove the spare).
	crashed := filepath.Join(t.TempDir(), "s.jsonl")
	copyFile(t, x.path, crashed)
	must(t, os.Mkdir(filepath.Join(filepath.Dir(crashed), "s.scratch"), 0o700))
	for name := range x.files() {
		copyFile(t, filepath.Join(x.s.scratchDir, name), filepath.Join(filepath.Dir(crashed), "s.scratch", name))
	}
	x.s.Close(context.Background())

	r, err := Open(context.Background(), crashed, Options{})
	if err != nil {
		t.Fatalf("open after the crash: %v", err)
	}
	defer r.Close(context.Background())
	if _, err := os.Stat(r.scratchFile(a)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the settled task's emptied file after open: %v; want it removed", err)
	}
	if got := framesOf(t, r, b); !slices.Equal(got, []string{`2`}) {
		t.Fatalf("the live task's frames = %v; want [2]", got)
	}
}

// A spare written behind the store's back (a retirement that did not take,
// as the simulator's unlinkFail makes it) is neither reused nor removed:
// the next task gets a new file, and open ignores the settled task's.
func TestASpareWrittenBehindTheStoresBackIsLeftAlone(t *testing.T) {
	x := newSpareSession(t)
	a := x.task()
	x.frame(a, `1`)
	x.settle(a)
	kept := []byte("what the retirement did not empty\n")
	must(t, os.WriteFile(x.s.scratchFile(a), kept, fileMode))
	b := x.task()
	x.frame(b, `2`)
	if got, err := os.ReadFile(x.s.scratchFile(a)); err != nil || string(got) != string(kept) {
		t.Fatalf("the settled task's file = %q, %v; want it left as written", got, err)
	}
	if err := x.s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(x.s.scratchFile(a)); err != nil {
		t.Fatalf("Close removed a file it did not leave: %v", err)
	}
	r, err := Open(context.Background(), x.path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer r.Close(context.Background())
	if got := framesOf(t, r, b); !slices.Equal(got, []string{`2`}) {
		t.Fatalf("task %d's frames = %v; want [2]", b, got)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	must(t, err)
	must(t, os.WriteFile(to, data, fileMode))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
