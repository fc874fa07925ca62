package jsonl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/pico-go/pico/storage"
)

// failingFile is the main file with a write that fails on demand: after
// writing keep bytes of the next line (a short write) with err, and
// optionally a truncate that fails too.
type failingFile struct {
	appendFile
	failNext     bool
	keep         int
	err          error
	truncateFail bool
	syncFail     bool
}

func (f *failingFile) Write(p []byte) (int, error) {
	if !f.failNext {
		return f.appendFile.Write(p)
	}
	f.failNext = false
	n, _ := f.appendFile.Write(p[:f.keep])
	return n, f.err
}

func (f *failingFile) Truncate(size int64) error {
	if f.truncateFail {
		return errors.New("truncate refused")
	}
	return f.appendFile.Truncate(size)
}

func (f *failingFile) Sync() error {
	if f.syncFail {
		return syscall.EIO
	}
	return f.appendFile.Sync()
}

func entryBatch(id storage.ID) storage.CommitBatch {
	return storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: id, ConversationID: 1, Kind: "user"}}}}
}

// openWithFailingMain opens a session holding a conversation (1) and an
// entry (2), and puts a failing file in front of its main file.
func openWithFailingMain(t *testing.T, opts Options) (*Store, *failingFile, string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s, err := Open(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []storage.CommitBatch{
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}},
		entryBatch(2),
	} {
		if _, err := s.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	f := &failingFile{appendFile: s.main}
	s.main = f
	return s, f, path
}

func reopenedLastSeq(t *testing.T, path string) storage.ID {
	t.Helper()
	r, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer r.Close(context.Background())
	return r.LastSeq()
}

// A short write and a full disk leave part of a line in the file; the store
// cuts it back, reports the write as failed, and the next commit starts on
// a clean line, so the session still opens with exactly what was
// acknowledged.
func TestAFailedWriteIsCutBackAndTheNextCommitLandsClean(t *testing.T) {
	for name, cause := range map[string]error{"short write": errors.New("short write"), "disk full": syscall.ENOSPC} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, f, path := openWithFailingMain(t, Options{})
			before, _ := os.ReadFile(path)
			f.failNext, f.keep, f.err = true, 17, cause
			_, err := s.Commit(ctx, entryBatch(3))
			var fe *FileError
			if !errors.As(err, &fe) || !errors.Is(err, cause) || s.LastSeq() != 2 {
				t.Fatalf("failed write = %v, lastSeq %d; want a FileError wrapping %v and nothing published", err, s.LastSeq(), cause)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Fatalf("the partial line stayed:\n%s", after)
			}
			if r, err := s.Commit(ctx, entryBatch(3)); err != nil || r.First != 3 {
				t.Fatalf("the next commit = %+v, %v; want it at 3", r, err)
			}
			s.Close(ctx)
			if got := reopenedLastSeq(t, path); got != 3 {
				t.Fatalf("reopened lastSeq %d; want 3", got)
			}
		})
	}
}

// When the partial line cannot be cut back, the store is poisoned: every
// later commit returns the first failure, and nothing is glued onto the
// partial line; reopening recovers the acknowledged batches.
func TestAWriteThatCannotBeUndonePoisonsTheStore(t *testing.T) {
	for name, set := range map[string]func(f *failingFile){
		"truncate fails": func(f *failingFile) { f.failNext, f.keep, f.err, f.truncateFail = true, 9, syscall.ENOSPC, true },
		"sync fails":     func(f *failingFile) { f.syncFail = true },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, f, path := openWithFailingMain(t, Options{Fsync: true})
			set(f)
			_, first := s.Commit(ctx, entryBatch(3))
			if first == nil {
				t.Fatal("the failing write was acknowledged")
			}
			f.failNext, f.truncateFail, f.syncFail = false, false, false
			_, err := s.Commit(ctx, entryBatch(3))
			var pe *storage.PoisonedError
			if !errors.As(err, &pe) || pe.Err != first {
				t.Fatalf("commit after the failure = %v; want a PoisonedError carrying %v", err, first)
			}
			s.Close(ctx)
			// The torn bytes are a torn tail to the next open (or, for a
			// failed sync, a line that may or may not be durable).
			if got := reopenedLastSeq(t, path); got != 2 && got != 3 {
				t.Fatalf("reopened lastSeq %d; want the acknowledged 2 (or 3 if the unsynced line stayed)", got)
			}
		})
	}
}

// One limit, storage.BatchBytesMax, bounds what Commit writes and what the
// reader accepts; the test lowers it to keep its files small.
func TestABatchOverTheLimitIsRefusedBeforeAnythingIsWrittenAndTheReaderNamesItsLine(t *testing.T) {
	saved := batchBytesMax
	t.Cleanup(func() { batchBytesMax = saved })
	batchBytesMax = 200
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	big := entryBatch(2)
	big.Writes[0].Entry.Key = strings.Repeat("k", 300)
	_, err = s.Commit(ctx, big)
	var be *storage.BatchError
	var tl *storage.BatchTooLargeError
	if !errors.As(err, &be) || !errors.As(err, &tl) || tl.Max != 200 || tl.Bytes <= 200 {
		t.Fatalf("oversize commit = %v; want a BatchError wrapping BatchTooLargeError over 200", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) || s.LastSeq() != 1 {
		t.Fatal("an oversize batch was written or published")
	}
	if _, err := s.Commit(ctx, entryBatch(2)); err != nil {
		t.Fatalf("a batch under the limit after the refusal = %v", err)
	}
	s.Close(ctx)

	// A line over the limit on disk (written by a build with a larger one)
	// fails the open naming the file and the line.
	batchBytesMax = 60
	_, err = Open(ctx, path, Options{})
	var fe *FileError
	if !errors.As(err, &fe) || fe.Path != path || fe.Line != 2 || !errors.As(err, &tl) {
		t.Fatalf("open with a line over the limit = %v; want a FileError at line 2 wrapping BatchTooLargeError", err)
	}
}

// scratchSession opens a session with a conversation (1) and a live task
// (2), which has written no scratch yet.
func scratchSession(t *testing.T, path string) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []storage.CommitBatch{
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}},
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteTask, Task: &storage.Task{ID: 2, ConversationID: 1, Kind: "k", Status: "s", Role: storage.RoleInflight}}}},
	} {
		if _, err := s.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func frameBatch(v string) storage.CommitBatch {
	addr := storage.Address{Scope: storage.ScratchScope(2), Namespace: "f"}
	return storage.CommitBatch{Kind: storage.BatchScratch, Task: 2, Writes: []storage.Write{{Type: storage.WriteListAppend, Addr: &addr, Value: []byte(v)}}}
}

// frames is what task 2's scratch list holds after reopening path.
func reopenedFrames(t *testing.T, path string) []string {
	t.Helper()
	ctx := context.Background()
	r, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer r.Close(ctx)
	page, err := r.ReadList(ctx, storage.Address{Scope: storage.ScratchScope(2), Namespace: "f"}, storage.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range page.Items {
		got = append(got, string(e.Value))
	}
	return got
}

// A task's first scratch write carries the file's header and the batch in
// one write; when it fails, the file goes with it, and the task's next
// scratch commit starts the file afresh.
func TestAFailedFirstScratchWriteLeavesNoFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := scratchSession(t, path)
	scratch := s.scratchFile(2)
	saved := openScratchFile
	t.Cleanup(func() { openScratchFile = saved })
	openScratchFile = func(path string, create bool) (appendFile, error) {
		f, err := saved(path, create)
		if err != nil {
			return nil, err
		}
		return &failingFile{appendFile: f, failNext: true, keep: 20, err: syscall.ENOSPC}, nil
	}
	if _, err := s.Commit(ctx, frameBatch(`1`)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("first scratch commit on a full disk = %v; want ENOSPC", err)
	}
	if _, err := os.Stat(scratch); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed first write left the scratch file (%v)", err)
	}
	openScratchFile = saved
	for _, v := range []string{`2`, `3`} {
		if _, err := s.Commit(ctx, frameBatch(v)); err != nil {
			t.Fatalf("scratch commit %s after the failure: %v", v, err)
		}
	}
	s.Close(ctx)
	if got := reopenedFrames(t, path); strings.Join(got, ",") != "2,3" {
		t.Fatalf("reopened frames %v; want [2 3]", got)
	}
}

// A crash in a task's first scratch write can leave its file empty or
// holding part of the header: nothing in it was acknowledged. Open reports
// it as a torn tail and removes it, and the task's scratch starts afresh;
// a file that is not a header's beginning is refused as before.
func TestAScratchFileTornInItsHeaderIsATornTail(t *testing.T) {
	header := fmt.Sprintf(`{"pico":"scratch","format":%d,"task":2}`, FormatVersion)
	for _, torn := range []string{"", `{`, header[:20], header} {
		t.Run(fmt.Sprintf("%d bytes", len(torn)), func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "s.jsonl")
			s := scratchSession(t, path)
			scratch := s.scratchFile(2)
			s.Close(ctx)
			os.MkdirAll(filepath.Dir(scratch), 0o700)
			if err := os.WriteFile(scratch, []byte(torn), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := Open(ctx, path, Options{})
			if err != nil {
				t.Fatalf("open with a scratch file torn in its header: %v", err)
			}
			want := []TornTail{{Path: scratch, Offset: 0, Bytes: len(torn)}}
			if got := r.TornTails(); !reflect.DeepEqual(got, want) {
				t.Fatalf("torn tails %+v; want %+v", got, want)
			}
			if _, err := os.Stat(scratch); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the torn scratch file is still there (%v)", err)
			}
			if _, err := r.Commit(ctx, frameBatch(`7`)); err != nil {
				t.Fatal(err)
			}
			r.Close(ctx)
			if got := reopenedFrames(t, path); strings.Join(got, ",") != "7" {
				t.Fatalf("reopened frames %v; want [7]", got)
			}
		})
	}
	t.Run("not a header", func(t *testing.T) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "s.jsonl")
		s := scratchSession(t, path)
		scratch := s.scratchFile(2)
		s.Close(ctx)
		os.MkdirAll(filepath.Dir(scratch), 0o700)
		os.WriteFile(scratch, []byte(`{"pico":"other"`), 0o600)
		var fe *FileError
		if _, err := Open(ctx, path, Options{}); !errors.As(err, &fe) || fe.Path != scratch || !errors.Is(err, ErrNotSession) {
			t.Fatalf("open with a foreign scratch file = %v; want ErrNotSession naming it", err)
		}
		if data, _ := os.ReadFile(scratch); string(data) != `{"pico":"other"` {
			t.Fatalf("the foreign file was changed to %q", data)
		}
	})
}

// Options.WriteFault sees every line a commit writes, a new scratch file's
// header with its first batch, and a write it fails is handled as a full
// disk is: the prefix it let through is cut back (a new scratch file
// removed), nothing is published, and the next commits land clean.
func TestWriteFaultFailsWritesAsAFullDisk(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := scratchSession(t, path)
	scratch := s.scratchFile(2)
	type seen struct {
		path string
		line string
	}
	var asked []seen
	failNext := false
	s.opts.WriteFault = func(p string, line []byte) (int, error) {
		asked = append(asked, seen{p, string(line)})
		if failNext {
			failNext = false
			return len(line) / 2, syscall.ENOSPC
		}
		return 0, nil
	}
	before, _ := os.ReadFile(path)
	failNext = true
	if _, err := s.Commit(ctx, entryBatch(3)); !errors.Is(err, syscall.ENOSPC) || s.LastSeq() != 2 {
		t.Fatalf("main commit on a full disk = %v, lastSeq %d; want ENOSPC and nothing published", err, s.LastSeq())
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatalf("the half line stayed in the main file:\n%s", after)
	}
	failNext = true
	if _, err := s.Commit(ctx, frameBatch(`1`)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("first scratch commit on a full disk = %v; want ENOSPC", err)
	}
	if _, err := os.Stat(scratch); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed first scratch write left its file (%v)", err)
	}
	if got, err := s.ReadList(ctx, storage.Address{Scope: storage.ScratchScope(2), Namespace: "f"}, storage.ListQuery{}); err != nil || len(got.Items) != 0 {
		t.Fatalf("the failed scratch batch reads back: %v, %v", got.Items, err)
	}
	if _, err := s.Commit(ctx, entryBatch(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, frameBatch(`2`)); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 4 || asked[0].path != path || asked[1].path != scratch || !strings.HasPrefix(asked[1].line, `{"pico":"scratch"`) ||
		!strings.HasSuffix(asked[2].line, "\n") || asked[3].path != scratch {
		t.Fatalf("WriteFault was asked %q; want the main line, the scratch header and line, and the two that landed", asked)
	}
	s.Close(ctx)
	if got := reopenedFrames(t, path); strings.Join(got, ",") != "2" || reopenedLastSeq(t, path) != 4 {
		t.Fatalf("reopened frames %v, lastSeq %d; want [2] and 4", got, reopenedLastSeq(t, path))
	}
}
