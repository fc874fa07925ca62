package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/sqlite"
)

// A SQLite run's database starts with both neighbours, whole, either side
// of the run's session; the run's own writes leave them intact, and any
// change to a neighbour's rows (a commit into it, a row rewritten by hand)
// is reported, naming the row.
func TestNeighboursSurroundTheRunAndReportATouch(t *testing.T) {
	ctx := context.Background()
	if !(neighbours[0] < runSession && runSession < neighbours[1]) {
		t.Fatalf("neighbours %v do not sort either side of the run's session %q", neighbours, runSession)
	}
	db, err := theNeighbours(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() string {
		path := filepath.Join(t.TempDir(), "sessions.db")
		if err := withNeighbours(ctx, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	path := fresh()
	var lasts []storage.ID
	for _, name := range neighbours {
		s, err := sqlite.Open(ctx, path, sqlite.Options{Session: name, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		last := s.LastSeq()
		lasts = append(lasts, last)
		live, err := s.ScanTasks(ctx, storage.TaskQuery{Live: storage.Bool(true)})
		s.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if last < 300 || len(live.Items) == 0 {
			t.Errorf("neighbour %s ends at sequence %d with %d live tasks; want at least 300 and some, to meet a forgetful read", name, last, len(live.Items))
		}
		row := fmt.Sprintf(`session_metadata(%q, "last_seq", "%d")`, name, last)
		if !slices.Contains(db.rows, row) {
			t.Errorf("the neighbours' rows hold no %s", row)
		}
	}
	if lasts[1] != lasts[0]+2 {
		t.Errorf("the neighbours end at sequences %v; their rounds, on the same ids, should end together, and the second two ids later", lasts)
	}
	if d := neighboursIntact(ctx, path); d != "" {
		t.Fatalf("untouched neighbours: %s", d)
	}

	// The run's session, written beside them, touches neither.
	addr := storage.Address{Scope: storage.SessionScope(), Namespace: "neighbour", Key: "k"}
	set := storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteValueSet, Addr: &addr, Value: json.RawMessage(`"the run's"`)}}}
	commit := func(session string) {
		s, err := sqlite.Open(ctx, path, sqlite.Options{Session: session})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if _, err := s.Commit(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	commit(runSession)
	if d := neighboursIntact(ctx, path); d != "" {
		t.Fatalf("after a write to the run's own session: %s", d)
	}

	// The same write into a neighbour adds its rows and moves its last
	// sequence.
	commit(neighbours[1])
	if d := neighboursIntact(ctx, path); !strings.Contains(d, neighbours[1]) {
		t.Errorf("after a write into %s: neighboursIntact = %q, want a row of it", neighbours[1], d)
	}

	// A task of a neighbour changed behind the storage's back, the kind of
	// thing a write that forgot its session does.
	path = fresh()
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE tasks SET status='done', role='terminal' WHERE session=? AND id=(SELECT MAX(id) FROM tasks WHERE session=? AND role='inflight')`,
		neighbours[0], neighbours[0]); err != nil {
		t.Fatal(err)
	}
	if d := neighboursIntact(ctx, path); !strings.Contains(d, "tasks("+strconv.Quote(neighbours[0])) || !strings.Contains(d, `"terminal"`) {
		t.Errorf("after settling a live task of %s by hand: neighboursIntact = %q, want the task's row as it is and was", neighbours[0], d)
	}
}

// The run's rows are held to leaving none of a key behind: a session's
// own values and lists pass; a version of a key it no longer has, or an
// element under a key that is a value, is reported, naming the table.
func TestLeakedRowsAreReported(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sessions.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{Session: runSession})
	if err != nil {
		t.Fatal(err)
	}
	val := storage.Address{Scope: storage.ConversationScope(1), Namespace: "t.v", Rewind: true}
	list := storage.Address{Scope: storage.ConversationScope(1), Namespace: "t.l", Rewind: true}
	if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		{Type: storage.WriteValueSet, Addr: &val, Value: json.RawMessage(`1`)},
		{Type: storage.WriteListAppend, Addr: &list, Value: json.RawMessage(`2`)},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if d := leakedRows(ctx, path); d != "" {
		t.Fatalf("a session's own values and lists: %s", d)
	}
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var valueKey string
	if err := db.QueryRowContext(ctx, `SELECT state_key FROM value_versions WHERE session=?`, runSession).Scan(&valueKey); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ table, insert, undo string }{
		{"value_versions", `INSERT INTO value_versions(session, state_key, seq, value) VALUES (?, 'gone', 9, '1')`,
			`DELETE FROM value_versions WHERE session=? AND state_key='gone'`},
		{"list_elements", `INSERT INTO list_elements(session, state_key, id, value) VALUES (?, '` + valueKey + `', 9, '1')`,
			`DELETE FROM list_elements WHERE session=? AND id=9`},
	} {
		if _, err := db.ExecContext(ctx, tc.insert, runSession); err != nil {
			t.Fatal(err)
		}
		if d := leakedRows(ctx, path); !strings.Contains(d, tc.table) {
			t.Fatalf("a leaked row of %s: %q", tc.table, d)
		}
		if _, err := db.ExecContext(ctx, tc.undo, runSession); err != nil {
			t.Fatal(err)
		}
		if d := leakedRows(ctx, path); d != "" {
			t.Fatalf("with the leaked row of %s gone: %s", tc.table, d)
		}
	}
}
