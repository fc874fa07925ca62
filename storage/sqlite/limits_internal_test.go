package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pico-go/pico/storage"
)

func entry(id ID, key string) storage.CommitBatch {
	return storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: id, ConversationID: 1, Kind: "user", Key: key}}}}
}

func openOne(t *testing.T) (*Store, string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(ctx, path, Options{Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}}); err != nil {
		t.Fatal(err)
	}
	return s, path
}

// A full disk (here: the database may not grow past its page limit) fails
// the commit's transaction, which rolls back whole: nothing of the batch is
// stored, the store stays usable, and a reopen sees exactly what was
// acknowledged.
func TestAFullDiskRollsTheCommitBackAndTheStoreGoesOn(t *testing.T) {
	ctx := context.Background()
	s, path := openOne(t)
	lift := fillDisk(t, s) // the page limit is a setting of the writer's connection
	_, err := s.Commit(ctx, entry(2, strings.Repeat("k", 64<<10)))
	if err == nil || !strings.Contains(err.Error(), "full") || !strings.Contains(err.Error(), "rolled back") || s.LastSeq() != 1 {
		t.Fatalf("commit on a full database = %v, lastSeq %d; want a rolled-back failure naming the full database", err, s.LastSeq())
	}
	lift()
	if r, err := s.Commit(ctx, entry(2, "fits")); err != nil || r.First != 2 {
		t.Fatalf("commit once there is room = %+v, %v; want it at 2", r, err)
	}
	s.Close(ctx)
	r, err := Open(ctx, path, Options{Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	got, err := r.GetEntries(ctx, []ID{2})
	if err != nil || r.LastSeq() != 2 || got[2] == nil || got[2].Key != "fits" {
		t.Fatalf("reopened: lastSeq %d, entry 2 %+v, %v; want the acknowledged batch only", r.LastSeq(), got[2], err)
	}
}

func TestABatchOverTheLimitIsRefusedBeforeAnythingIsStored(t *testing.T) {
	saved := batchBytesMax
	t.Cleanup(func() { batchBytesMax = saved })
	batchBytesMax = 300
	ctx := context.Background()
	s, _ := openOne(t)
	defer s.Close(ctx)
	_, err := s.Commit(ctx, entry(2, strings.Repeat("k", 400)))
	var be *storage.BatchError
	var tl *storage.BatchTooLargeError
	if !errors.As(err, &be) || !errors.As(err, &tl) || tl.Max != 300 || s.LastSeq() != 1 {
		t.Fatalf("oversize commit = %v, lastSeq %d; want a BatchError wrapping BatchTooLargeError and nothing stored", err, s.LastSeq())
	}
	if got, _ := s.GetEntries(ctx, []ID{2}); len(got) != 0 {
		t.Fatal("the oversize entry is readable")
	}
	if _, err := s.Commit(ctx, entry(2, "small")); err != nil {
		t.Fatalf("a batch under the limit after the refusal = %v", err)
	}
}

// Options.Fsync is SQLite's synchronous=FULL on every connection (the log
// synced at each commit); without it, NORMAL (synced at checkpoints). Every
// connection's page cache is bounded the same.
func TestFsyncSetsTheSyncModeOfEveryConnectionAndTheCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		fsync bool
		want  int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{{false, 1}, {true, 2}} {
		path := filepath.Join(t.TempDir(), "s.db")
		s, err := Open(ctx, path, Options{Session: "s", Fsync: tc.fsync})
		if err != nil {
			t.Fatal(err)
		}
		// Two connections at once beside the writer's: the mode is each
		// one's, from the DSN.
		c1, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range []interface {
			QueryRowContext(context.Context, string, ...any) *sql.Row
		}{c1, c2, s.w} {
			var got, cache int
			if err := c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if err := c.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&cache); err != nil {
				t.Fatal(err)
			}
			if got != tc.want || cache != -pageCacheKiB {
				t.Errorf("Fsync %t: connection %d (3: the writer's) has synchronous=%d, cache_size=%d; want %d, %d", tc.fsync, i+1, got, cache, tc.want, -pageCacheKiB)
			}
		}
		c1.Close()
		c2.Close()
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A batch's size is the length of what json.Marshal writes of its writes,
// escapes and all; one json.Marshal refuses is its error. The buffer it is
// measured in is kept for the next commit only while small.
func TestABatchIsMeasuredAsJSONMarshalWritesIt(t *testing.T) {
	ctx := context.Background()
	s, _ := openOne(t)
	defer s.Close(ctx)
	a := storage.ConversationValue[int]("n<", storage.Sticky).In(1).WithKey("&").Address
	for _, ws := range [][]storage.Write{
		{{Type: storage.WriteValueSet, Addr: &a, Value: json.RawMessage(` { "a" : "<\u2028>" } `)}},
		{{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 2, ConversationID: 1, Kind: "user", Key: strings.Repeat("é<", 40<<10)}}},
	} {
		want, err := json.Marshal(ws)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := s.encodedSize(storage.CommitBatch{Kind: storage.BatchMain, Writes: ws}); err != nil || n != len(want) {
			t.Errorf("encodedSize = %d, %v; json.Marshal writes %d bytes", n, err, len(want))
		}
		if cap(s.sizeBuf) > sizeBufMax {
			t.Errorf("the store kept a buffer of %d bytes", cap(s.sizeBuf))
		}
	}
	bad := storage.Address{Namespace: "n"}
	ws := []storage.Write{{Type: storage.WriteValueSet, Addr: &bad, Value: json.RawMessage(`1`)}}
	_, want := json.Marshal(ws)
	if _, err := s.encodedSize(storage.CommitBatch{Kind: storage.BatchMain, Writes: ws}); err == nil || err.Error() != want.Error() {
		t.Errorf("encodedSize of a scope of no kind = %v; want json.Marshal's %v", err, want)
	}
}
