package sqlite_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/sqlite"
)

// historyBatchWritesMax bounds the writes of one batch that builds a
// benchmark's prior history.
const historyBatchWritesMax = 500

var (
	benchModel  = storage.ConversationValue[int]("pi.model", storage.Rewind).In(1).Address
	benchResult = storage.ConversationValue[json.RawMessage]("pi.inputResult", storage.Sticky).In(1)
	benchMsg    = json.RawMessage(`[{"role":"user","content":"a short user message of a realistic size","timestamp":0}]`)
)

// benchStep is the batch of one step of a turn (a value and an entry), the
// same shape storage/jsonl's commit benchmarks commit.
func benchStep(s storage.Storage) storage.CommitBatch {
	return storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteValueSet, Addr: &benchModel, Value: json.RawMessage(`"faux-1"`)},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: s.LastSeq() + 2, ConversationID: 1, Kind: "user", Data: benchMsg, Key: "k"}},
	}}
}

// historyEntry is write i of a benchmark's prior history: an entry.
func historyEntry(seq ID, _ int) storage.Write {
	return storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: seq, ConversationID: 1, Kind: "user", Data: benchMsg, Key: "k"}}
}

// historyKeyedValue is write i of a benchmark's prior history: a keyed
// value of one namespace, as the harness records one input result per turn.
func historyKeyedValue(_ ID, i int) storage.Write {
	a := benchResult.WithKey(strconv.Itoa(i)).Address
	return storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: json.RawMessage(`{"status":"done"}`)}
}

// openBench opens a fresh database holding conversation 1 and history
// writes made by write, closed and reopened so the history is checkpointed
// into the main file, and returns its size on disk while closed.
func openBench(b *testing.B, history int, write func(seq ID, i int) storage.Write) (s *sqlite.Store, path string, closedBytes int64) {
	b.Helper()
	ctx := context.Background()
	path = filepath.Join(b.TempDir(), "s.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{Session: "s"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
	}}); err != nil {
		b.Fatal(err)
	}
	for done := 0; done < history; {
		batch := storage.CommitBatch{Kind: storage.BatchMain}
		for i := range min(history-done, historyBatchWritesMax) {
			batch.Writes = append(batch.Writes, write(s.LastSeq()+1+ID(i), done+i))
		}
		if _, err := s.Commit(ctx, batch); err != nil {
			b.Fatal(err)
		}
		done += len(batch.Writes)
	}
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
	closedBytes = sessionBytes(path)
	s, err = sqlite.Open(ctx, path, sqlite.Options{Session: "s"})
	if err != nil {
		b.Fatal(err)
	}
	return s, path, closedBytes
}

// sessionBytes is the size of the database with its -wal and -shm files.
func sessionBytes(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if info, err := os.Stat(p); err == nil {
			n += info.Size()
		}
	}
	return n
}

// BenchmarkCommitSQLite commits b.N small main batches (an entry and a
// value) to a database with no history and with 10,000 entries of it. It
// reports the bytes on disk each commit adds once the session is closed
// (the WAL checkpointed into the main file; a live WAL only ever grows to
// its checkpoint size, so its length says little per commit).
func BenchmarkCommitSQLite(b *testing.B) {
	for _, history := range []int{0, 10_000} {
		b.Run("history="+strconv.Itoa(history), func(b *testing.B) {
			ctx := context.Background()
			s, path, start := openBench(b, history, historyEntry)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := s.Commit(ctx, benchStep(s)); err != nil {
					b.Fatalf("commit %d: %v", i, err)
				}
			}
			b.StopTimer()
			if err := s.Close(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(sessionBytes(path)-start)/float64(b.N), "bytes/commit")
		})
	}
}

// BenchmarkReadNewestHeadSQLite reads the newest head of a conversation
// with 10,000 entries: the first read of every reopened harness.
func BenchmarkReadNewestHeadSQLite(b *testing.B) {
	ctx := context.Background()
	s, _, _ := openBench(b, 10_000, historyEntry)
	defer s.Close(ctx)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, _, err := s.NewestHead(ctx, 1, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSettleSQLite settles a task that wrote one scratch value, in a
// session holding no other state and holding 10,000 keyed values (a long
// session's input results). A settle retires only its own task's scratch,
// so its cost should not depend on the rest of the session's state.
func BenchmarkSettleSQLite(b *testing.B) {
	for _, keys := range []int{0, 10_000} {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			ctx := context.Background()
			s, _, _ := openBench(b, keys, historyKeyedValue)
			defer s.Close(ctx)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				task := s.LastSeq() + 1
				scratch := storage.ScratchValue[int]("s").In(task).Address
				for _, batch := range []storage.CommitBatch{
					{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteTask, Task: &storage.Task{
						ID: task, ConversationID: 1, Kind: "k", Status: "s", Role: storage.RoleStart}}}},
					{Kind: storage.BatchScratch, Task: task, Writes: []storage.Write{
						{Type: storage.WriteValueSet, Addr: &scratch, Value: json.RawMessage(`1`)}}},
				} {
					if _, err := s.Commit(ctx, batch); err != nil {
						b.Fatalf("task %d before its settle: %v", i, err)
					}
				}
				b.StartTimer()
				if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
					{Type: storage.WriteSettle, ID: task, Status: "done", Role: storage.RoleTerminal},
				}}); err != nil {
					b.Fatalf("settle %d: %v", i, err)
				}
			}
		})
	}
}
