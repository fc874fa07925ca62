package jsonl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
