package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/sqlite"
)

// The rules of DESIGN §9a for a SQLite session: one writer per session, a
// database that identifies itself and refuses anyone else's, a schema
// created whole, private files, and a read-only open for checkers.

const helperEnv = "PICO_SQLITE_TEST_HOLD"

// TestMain lets the test binary be the second process: with helperEnv set
// it opens session "s" of that database, says "held" and keeps it until
// its stdin closes.
func TestMain(m *testing.M) {
	if path := os.Getenv(helperEnv); path != "" {
		s, err := sqlite.Open(context.Background(), path, sqlite.Options{Session: "s"})
		if err != nil {
			fmt.Println("refused:", err)
			os.Exit(3)
		}
		fmt.Println("held")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		s.Close(context.Background())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func createConv(t *testing.T, s storage.Storage) {
	t.Helper()
	if _, err := s.Commit(context.Background(), storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}}); err != nil {
		t.Fatal(err)
	}
}

func TestASecondWriterOfOneSessionIsRefusedWhileOtherSessionsOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	a := open(t, path, "a")
	_, err := sqlite.Open(ctx, path, sqlite.Options{Session: "a"})
	var le *storage.LockedError
	if !errors.As(err, &le) || le.Holder != fmt.Sprintf("pid %d", os.Getpid()) {
		t.Fatalf("second open of session a = %v; want a LockedError naming this pid", err)
	}
	b := open(t, path, "b") // another session of the same file has its own writer
	b.Close(ctx)
	a.Close(ctx)
	open(t, path, "a").Close(ctx)
}

func TestASecondProcessIsRefusedUntilTheHolderDies(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s := open(t, path, "s")
	createConv(t, s)
	s.Close(ctx)
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), helperEnv+"="+path)
	stdin, _ := holder.StdinPipe()
	stdout, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "held\n" {
		t.Fatalf("the holder said %q; want held", line)
	}
	_, err := sqlite.Open(ctx, path, sqlite.Options{Session: "s"})
	var le *storage.LockedError
	if !errors.As(err, &le) || le.Holder != fmt.Sprintf("pid %d", holder.Process.Pid) {
		t.Fatalf("open beside a live holder = %v; want a LockedError naming pid %d", err, holder.Process.Pid)
	}
	holder.Process.Kill()
	holder.Wait()
	r := open(t, path, "s")
	if r.LastSeq() != 1 {
		t.Fatalf("after the holder died, lastSeq %d; want 1", r.LastSeq())
	}
	r.Close(ctx)
}

// Were two writers to meet anyway (a lock the file system does not honour),
// the one whose view is stale is refused: last_seq is checked inside the
// write transaction, and a moved one poisons the handle.
func TestAWriterWhoseLastSeqMovedIsRefusedAndPoisoned(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s := open(t, path, "s")
	defer s.Close(ctx)
	createConv(t, s)
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE session_metadata SET value='85' WHERE session='s' AND key='last_seq'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	entry := storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 2, ConversationID: 1, Kind: "user"}}}}
	_, err = s.Commit(ctx, entry)
	var le *storage.LockedError
	if !errors.As(err, &le) {
		t.Fatalf("stale commit = %v; want a LockedError", err)
	}
	if got, _ := s.GetEntries(ctx, []storage.ID{2}); len(got) != 0 {
		t.Fatal("the stale writer's entry was stored")
	}
	var pe *storage.PoisonedError
	if _, err := s.Commit(ctx, entry); !errors.As(err, &pe) {
		t.Fatalf("the next commit = %v; want a PoisonedError", err)
	}
}

// fileState is what a refused open must leave alone: the bytes, and no WAL
// or shared memory beside them.
func fileState(t *testing.T, path string) string {
	t.Helper()
	data, _ := os.ReadFile(path)
	_, walErr := os.Stat(path + "-wal")
	return fmt.Sprintf("%x wal:%v", data, walErr == nil)
}

func TestAnotherProgramsDatabaseIsRefusedUntouched(t *testing.T) {
	dir := t.TempDir()
	for name, setup := range map[string]string{
		"tables":         `CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes(text) VALUES('milk');`,
		"application id": `PRAGMA application_id=1234; CREATE TABLE t(x);`,
	} {
		path := filepath.Join(dir, name+".db")
		db, err := sql.Open("sqlite3", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(setup); err != nil {
			t.Fatal(err)
		}
		db.Close()
		before := fileState(t, path)
		_, err = sqlite.Open(context.Background(), path, sqlite.Options{Session: "s"})
		if !errors.Is(err, sqlite.ErrNotPicoDatabase) {
			t.Errorf("%s: open = %v; want ErrNotPicoDatabase", name, err)
		}
		if after := fileState(t, path); after != before {
			t.Errorf("%s: the refused database was changed (or switched to WAL)", name)
		}
	}
}

// The schema is created in one transaction: a creation that fails half way
// leaves none of it behind.
func TestAFailedSchemaCreationLeavesNothingBehind(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	// A session table of the wrong shape: our creation gets past the
	// identity check and fails at its first insert.
	if _, err := db.Exec(`CREATE TABLE session_metadata(x)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.Open(context.Background(), path, sqlite.Options{Session: "s"}); err == nil {
		t.Fatal("open over a broken session table succeeded")
	}
	db, _ = sql.Open("sqlite3", path)
	defer db.Close()
	var tables int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type='table'`).Scan(&tables); err != nil || tables != 1 {
		t.Fatalf("tables after the failed creation = %d, %v; want only the one that was there", tables, err)
	}
}

func TestTheDatabaseAndItsWALArePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s := open(t, path, "s")
	defer s.Close(context.Background())
	createConv(t, s)
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		info, err := os.Stat(p)
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v; want mode 0600", p, info, err)
		}
	}
}

func TestAReadOnlyOpenWritesNothingAndTakesNoLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	w := open(t, path, "s")
	createConv(t, w)
	w.Close(ctx)
	writer := open(t, path, "s") // a live writer does not keep a reader out
	defer writer.Close(ctx)
	r, err := sqlite.Open(ctx, path, sqlite.Options{Session: "s", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	if r.LastSeq() != 1 {
		t.Fatalf("read-only lastSeq %d; want 1", r.LastSeq())
	}
	if _, err := r.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain}); !errors.Is(err, sqlite.ErrReadOnly) {
		t.Fatalf("read-only commit = %v; want ErrReadOnly", err)
	}
	var nf *sqlite.SessionNotFoundError
	if _, err := sqlite.Open(ctx, path, sqlite.Options{Session: "nosuch", ReadOnly: true}); !errors.As(err, &nf) {
		t.Fatalf("read-only open of an absent session = %v; want SessionNotFoundError", err)
	}
	if names, err := sqlite.Sessions(ctx, path); err != nil || len(names) != 1 || names[0] != "s" {
		t.Fatalf("sessions = %v, %v; want [s] (the absent session was not created)", names, err)
	}
}
