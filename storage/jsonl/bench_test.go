package jsonl_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
)

// benchmarkCommit commits b.N small main batches (an entry and a value),
// the shape of one step of a turn, and reports bytes on disk per commit.
func benchmarkCommit(b *testing.B, s storage.Storage, path string) {
	ctx := context.Background()
	if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
	}}); err != nil {
		b.Fatal(err)
	}
	addr := storage.ConversationValue[int]("pi.model", storage.Rewind).In(1).Address
	msg := json.RawMessage(`[{"role":"user","content":"a short user message of a realistic size","timestamp":0}]`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := s.LastSeq() + 2
		_, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
			{Type: storage.WriteValueSet, Addr: &addr, Value: json.RawMessage(`"faux-1"`)},
			{Type: storage.WriteEntry, Entry: &storage.Entry{ID: id, ConversationID: 1, Kind: "user", Data: msg, Key: "k"}},
		}})
		if err != nil {
			b.Fatalf("commit %d: %v", i, err)
		}
	}
	b.StopTimer()
	if path != "" {
		info, err := os.Stat(path)
		if err == nil {
			b.ReportMetric(float64(info.Size())/float64(b.N), "bytes/commit")
		}
	}
}

func BenchmarkCommitMemory(b *testing.B) { benchmarkCommit(b, memory.New(), "") }

func BenchmarkCommitJSONL(b *testing.B) {
	path := filepath.Join(b.TempDir(), "s.jsonl")
	s, err := jsonl.Open(context.Background(), path, jsonl.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	benchmarkCommit(b, s, path)
}

func BenchmarkCommitJSONLFsync(b *testing.B) {
	path := filepath.Join(b.TempDir(), "s.jsonl")
	s, err := jsonl.Open(context.Background(), path, jsonl.Options{Fsync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	benchmarkCommit(b, s, path)
}
