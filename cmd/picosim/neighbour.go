package main

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/sqlite"
)

// A SQLite database holds any number of sessions, each numbering its ids
// from 1 (§7): a read that forgets its session answers with another
// session's rows. Every SQLite run's database therefore starts with two
// neighbour sessions, written before the harness opens its own, with the
// same ids as the run's records but other contents: each is the history
// of a generated run (neighbours/, the session files of generated seeds 6
// and 24, which share a run's shape: conversation 1, its first input and
// turn) followed by about 450 ids written here (conversations forked,
// owned and deleted, entries keyed, with heads and edits, tasks, a
// quarter of them left live and some marked, scratch, values and lists).
// One sorts before the run's session and one after, so that a forgetful
// read that keeps the first row and one that keeps the last both meet a
// stranger. The mirror then sees a row the memory store has not got, or
// the harness a live task it never made. A write that forgets its session
// changes a neighbour instead, which the run's end sees (neighboursIntact).

// neighbourRounds is how many rounds of writes follow a neighbour's
// generated history (about 9 ids each), from id roundsFrom in both, so
// that each round's records have the same ids in both neighbours: a
// write of the second that forgets its session meets the first's record
// of the same kind, which the rounds make differ (a task one settles is
// live in the other, one's list element is the other's removed one), and
// the second ends a batch later, claiming sequences from the first's last.
const (
	neighbourRounds = 50
	roundsFrom      = 200
)

//go:embed neighbours/*.jsonl
var neighbourHistories embed.FS

// neighbours are the neighbour sessions, by name, with their histories;
// the run's session (runSession) sorts between them.
var neighbours = []string{"a-neighbour", "z-neighbour"}

// neighbourDB is the database holding only the neighbours, and the rows
// each neighbour has when written alone (neighbourRows), which that
// database and every run's at its end are held to.
type neighbourDB struct {
	bytes []byte
	rows  []string
}

// neighbourDBs are the neighbour databases this process wrote, one per
// planted bug in force (plant.Active; none but "" outside the planted
// build), since this process's storage code writes them; each run copies
// one.
var neighbourDBs struct {
	sync.Mutex
	built map[string]*neighbourDB
}

// theNeighbours is the neighbour database for the planted bug in force,
// written at the first call.
func theNeighbours(ctx context.Context) (*neighbourDB, error) {
	neighbourDBs.Lock()
	defer neighbourDBs.Unlock()
	key := plant.Active()
	if db := neighbourDBs.built[key]; db != nil {
		return db, nil
	}
	db, err := buildNeighbours(ctx)
	if err != nil {
		return nil, err
	}
	if neighbourDBs.built == nil {
		neighbourDBs.built = map[string]*neighbourDB{}
	}
	neighbourDBs.built[key] = db
	return db, nil
}

// withNeighbours writes the database at path holding the neighbour
// sessions and nothing else.
func withNeighbours(ctx context.Context, path string) error {
	db, err := theNeighbours(ctx)
	if err != nil {
		return err
	}
	return os.WriteFile(path, db.bytes, fileMode)
}

// buildNeighbours writes the neighbours' histories one after the other
// into the database a run copies, and each into a database of its own as
// well, where a write that forgets its session can only meet its own
// rows: the rows of those are what the database must hold, before a run
// and after it. An error names no temporary path, so that a run it fails
// replays with the same verdict, unless it is the machine's.
func buildNeighbours(ctx context.Context) (*neighbourDB, error) {
	dir, err := tempDir(ctx, "picosim-neighbours-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	write := func(path, name string) error {
		err := writeNeighbour(ctx, path, name)
		switch {
		case isEnvironment(err): // the machine's (a full TMPDIR), reported as such
			return fmt.Errorf("picosim: neighbour session %s: %w", name, err)
		case err != nil:
			return fmt.Errorf("picosim: neighbour session %s: %s", name, strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), ""))
		}
		return nil
	}
	db := &neighbourDB{}
	shared := filepath.Join(dir, "sessions.db")
	for _, name := range neighbours {
		alone := filepath.Join(dir, name+".db")
		if err := write(alone, name); err != nil {
			return nil, err
		}
		rows, err := neighbourRows(ctx, alone)
		if err != nil {
			return nil, err
		}
		db.rows = append(db.rows, rows...)
		if err := write(shared, name); err != nil {
			return nil, err
		}
	}
	slices.Sort(db.rows)
	if d := db.changed(ctx, shared); d != "" {
		return nil, fmt.Errorf("picosim: writing the neighbours into one database: %s", d)
	}
	db.bytes, err = os.ReadFile(shared)
	return db, err
}

// neighbourWriter builds the neighbour's batches: each write's id is the
// store's last sequence plus its place in the batch.
type neighbourWriter struct {
	ctx    context.Context
	s      storage.Storage
	writes []storage.Write
}

// id is the sequence the next write gets.
func (w *neighbourWriter) id() storage.ID {
	return w.s.LastSeq() + 1 + storage.ID(len(w.writes))
}

func (w *neighbourWriter) add(wr storage.Write) storage.ID {
	id := w.id()
	w.writes = append(w.writes, wr)
	return id
}

// commit commits the writes added since the last commit, as one batch of
// kind (and task, for scratch).
func (w *neighbourWriter) commit(kind storage.BatchKind, task storage.ID) error {
	b := storage.CommitBatch{Kind: kind, Task: task, Writes: w.writes}
	w.writes = nil
	_, err := w.s.Commit(w.ctx, b)
	return err
}

func neighbourValue(round int, what string) json.RawMessage {
	return json.RawMessage(`{"neighbour":` + strconv.Quote(what) + `,"round":` + strconv.Itoa(round) + `}`)
}

// replayHistory commits the main batches of a session file's lines to s
// (the file's first line is its header). A scratch batch's ids, which the
// main file skips, are taken by session values, so that every id keeps
// its number.
func (w *neighbourWriter) replayHistory(text []byte) error {
	lines := bytes.Split(bytes.TrimSpace(text), []byte("\n"))
	for i, l := range lines[1:] {
		var b struct {
			First  storage.ID      `json:"first"`
			Writes []storage.Write `json:"writes"`
		}
		if err := json.Unmarshal(l, &b); err != nil {
			return fmt.Errorf("line %d: %w", i+2, err)
		}
		if err := w.pad(b.First); err != nil {
			return err
		}
		w.writes = b.Writes
		if err := w.commit(storage.BatchMain, 0); err != nil {
			return fmt.Errorf("line %d: %w", i+2, err)
		}
	}
	return nil
}

// pad commits session values until the next id is next, if it is not.
func (w *neighbourWriter) pad(next storage.ID) error {
	if w.id() >= next {
		return nil
	}
	gap := storage.Address{Scope: storage.SessionScope(), Namespace: "neighbour.gap"}
	for w.id() < next {
		w.add(storage.Write{Type: storage.WriteValueSet, Addr: &gap, Value: json.RawMessage(strconv.Itoa(int(w.id())))})
	}
	return w.commit(storage.BatchMain, 0)
}

// writeNeighbour opens session name of the database at path and commits
// its history: the generated run's, then the rounds.
func writeNeighbour(ctx context.Context, path, name string) error {
	s, err := sqlite.Open(ctx, path, sqlite.Options{Session: name})
	if err != nil {
		return err
	}
	err = writeRounds(ctx, s, name)
	if cerr := s.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

// writeRounds commits a neighbour's history to s.
func writeRounds(ctx context.Context, s storage.Storage, name string) error {
	w := &neighbourWriter{ctx: ctx, s: s}
	text, err := neighbourHistories.ReadFile("neighbours/" + name + ".jsonl")
	if err != nil {
		return err
	}
	if err := w.replayHistory(text); err != nil {
		return err
	}
	if err := w.pad(roundsFrom); err != nil {
		return err
	}
	if w.id() != roundsFrom {
		panic("picosim: a neighbour's history runs past roundsFrom")
	}
	second := name != neighbours[0]
	settled := map[bool]string{false: "done", true: "failed"}[second]
	session := storage.Address{Scope: storage.SessionScope(), Namespace: "neighbour", Key: "k"}
	w.add(storage.Write{Type: storage.WriteValueSet, Addr: &session, Value: neighbourValue(0, "session")})
	root := w.id()
	w.add(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: root}})
	if err := w.commit(storage.BatchMain, 0); err != nil {
		return err
	}
	convs := []storage.ID{root}
	var lastEntry, lastRootEntry, lastTask storage.ID
	live := []storage.ID{}
	elements := map[storage.ID][]storage.ID{}
	for r := range neighbourRounds {
		conv := convs[r%len(convs)]
		notes := storage.Address{Scope: storage.ConversationScope(conv), Namespace: "notes", Rewind: true}
		items := storage.Address{Scope: storage.ConversationScope(conv), Namespace: "items", Key: "k", Rewind: conv == root}
		// An entry, a task and state.
		entry := &storage.Entry{ConversationID: conv, Kind: "neighbour.note", Data: neighbourValue(r, "entry")}
		entry.ID = w.add(storage.Write{Type: storage.WriteEntry, Entry: entry})
		if r%3 == 0 {
			entry.Key = "k" + strconv.Itoa(r%4)
		}
		if r%5 == 0 {
			entry.Head = entry.ID
		}
		if r%7 == 3 && lastEntry != 0 {
			entry.Edits = []storage.ContextEdit{{Target: lastEntry, Action: storage.EditOmit}}
		}
		lastEntry = entry.ID
		if conv == root {
			lastRootEntry = entry.ID
		}
		task := &storage.Task{ConversationID: conv, Kind: "neighbour.kind", Status: "pending", Role: storage.RoleStart, State: neighbourValue(r, "task"), Background: r%2 == 1}
		if lastTask != 0 && r%3 == 1 {
			task.After = []storage.ID{lastTask}
		}
		task.ID = w.add(storage.Write{Type: storage.WriteTask, Task: task})
		lastTask = task.ID
		w.add(storage.Write{Type: storage.WriteValueSet, Addr: &notes, Value: neighbourValue(r, "notes")})
		w.add(storage.Write{Type: storage.WriteValueSet, Addr: &session, Value: neighbourValue(r, "session")})
		el := w.add(storage.Write{Type: storage.WriteListAppend, Addr: &items, Value: neighbourValue(r, "item")})
		elements[conv] = append(elements[conv], el)
		if err := w.commit(storage.BatchMain, 0); err != nil {
			return err
		}
		// The task's scratch, a value and a list, then its intent.
		scratch := storage.Address{Scope: storage.ScratchScope(task.ID), Namespace: "partial"}
		stream := storage.Address{Scope: storage.ScratchScope(task.ID), Namespace: "stream", Key: "k"}
		w.add(storage.Write{Type: storage.WriteValueSet, Addr: &scratch, Value: neighbourValue(r, "scratch")})
		w.add(storage.Write{Type: storage.WriteListAppend, Addr: &stream, Value: neighbourValue(r, "stream")})
		if err := w.commit(storage.BatchScratch, task.ID); err != nil {
			return err
		}
		w.add(storage.Write{Type: storage.WritePatch, ID: task.ID, Status: "running", Role: storage.RoleInflight, State: neighbourValue(r, "running")})
		if r%10 == 4 {
			// A fork of the root, owned by the task.
			fork := w.id()
			w.add(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: fork, Owner: task.ID,
				Parent: &storage.ParentRef{ConversationID: root, At: lastRootEntry}}})
			w.add(storage.Write{Type: storage.WritePatch, ID: task.ID, Owns: []storage.ID{fork}})
			convs = append(convs, fork)
		}
		if r%16 == 7 && len(elements[conv]) > 1 {
			i := 0 // the first; the second neighbour removes the last
			if second {
				i = len(elements[conv]) - 1
			}
			w.add(storage.Write{Type: storage.WriteListRemove, Addr: &items, Element: elements[conv][i]})
			elements[conv] = slices.Delete(elements[conv], i, i+1)
		}
		if r == neighbourRounds-5 {
			// The second clears a list the first keeps.
			if second {
				fork := storage.Address{Scope: storage.ConversationScope(convs[1]), Namespace: "items", Key: "k"}
				w.add(storage.Write{Type: storage.WriteListClear, Addr: &fork})
			} else {
				w.add(storage.Write{Type: storage.WriteValueSet, Addr: &notes, Value: neighbourValue(r, "kept")})
			}
		}
		if r%4 == 3 && !second || r%4 == 1 && second {
			live = append(live, task.ID)
			w.add(storage.Write{Type: storage.WritePatch, ID: task.ID, State: neighbourValue(r, "waiting")})
		} else {
			// Settled, with its state as it was one time in three.
			var state json.RawMessage
			if r%3 != 0 {
				state = neighbourValue(r, settled)
			}
			w.add(storage.Write{Type: storage.WriteSettle, ID: task.ID, Status: settled, Role: storage.RoleTerminal, State: state})
		}
		if r%9 == 5 && len(live) > 0 {
			w.add(storage.Write{Type: storage.WritePatch, ID: live[0], Abort: true})
		}
		if r == neighbourRounds/2 {
			// A conversation the second deletes and the first keeps.
			gone := w.id()
			w.add(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: gone}})
			if second {
				w.add(storage.Write{Type: storage.WriteDeleteConversation, ID: gone})
			} else {
				w.add(storage.Write{Type: storage.WriteValueSet, Addr: &session, Value: neighbourValue(r, "kept")})
			}
		}
		if err := w.commit(storage.BatchMain, 0); err != nil {
			return err
		}
	}
	if second {
		// One batch more, from the first's last sequence: a claim of the
		// next sequences that forgets its session moves the first's too.
		return w.pad(w.id() + 2)
	}
	return nil
}

// neighboursIntact holds the run's database at path, after the run, to the
// neighbours as they were written: every row of every session but the
// run's must be as it was, so that a write that forgot its session
// (moving every session's last sequence, deleting another's scratch,
// settling another's task) shows. It returns the first difference, or "".
func neighboursIntact(ctx context.Context, path string) string {
	db, err := theNeighbours(ctx)
	if err != nil {
		return err.Error() // the run could not have started
	}
	return db.changed(ctx, path)
}

// leakedRows names the first table of the run's session in the database
// at path with rows of a state key the session no longer has (a retired
// scratch key's versions, elements, clears or removes left behind), or
// rows in the wrong table for their key (a value's in list_elements, a
// list's in value_versions); "" when there are none.
func leakedRows(ctx context.Context, path string) string {
	db, err := sql.Open("sqlite3", "file:"+url.PathEscape(path)+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	for _, t := range []struct{ table, list string }{
		{"value_versions", "0"}, {"list_elements", "1"}, {"list_clears", "1"}, {"list_removes", "1"},
	} {
		var n int
		q := `SELECT COUNT(*) FROM ` + t.table + ` r WHERE r.session=? AND NOT EXISTS
			(SELECT 1 FROM values_index i WHERE i.session=r.session AND i.state_key=r.state_key AND i.is_list=` + t.list + `)`
		if err := db.QueryRowContext(ctx, q, runSession).Scan(&n); err != nil {
			return fmt.Sprintf("counting the rows of %s: %v", t.table, err)
		}
		if n > 0 {
			return fmt.Sprintf("%d rows of %s belong to no state key of the session's, or to a key of the other shape", n, t.table)
		}
	}
	return ""
}

// changed compares the rows of other sessions than the run's in the
// database at path with the neighbours' rows, and returns the first
// difference, or "".
func (db *neighbourDB) changed(ctx context.Context, path string) string {
	rows, err := neighbourRows(ctx, path)
	if err != nil {
		return err.Error()
	}
	for i := range max(len(rows), len(db.rows)) {
		switch {
		case i == len(rows):
			return "a neighbour's row is gone: " + db.rows[i]
		case i == len(db.rows):
			return "a row was added outside the run's session: " + rows[i]
		case rows[i] != db.rows[i]:
			return fmt.Sprintf("a neighbour's rows differ: %s was %s", rows[i], db.rows[i])
		}
	}
	return ""
}

// neighbourRows reads every row of the database at path that belongs to a
// session other than the run's, from every table that has a session
// column, one line a row, "table(value, …)", the lines sorted.
func neighbourRows(ctx context.Context, path string) ([]string, error) {
	db, err := sql.Open("sqlite3", "file:"+url.PathEscape(path)+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	tables, err := sessionTables(ctx, db)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range tables {
		rows, err := db.QueryContext(ctx, `SELECT * FROM "`+t+`" WHERE session <> ?`, runSession)
		if err != nil {
			return nil, fmt.Errorf("picosim: the neighbours' rows of %s: %w", t, err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, err
			}
			var b strings.Builder
			b.WriteString(t + "(")
			for i, v := range vals {
				if i > 0 {
					b.WriteString(", ")
				}
				switch v := v.(type) {
				case []byte:
					b.WriteString(strconv.Quote(string(v)))
				case string:
					b.WriteString(strconv.Quote(v))
				case nil:
					b.WriteString("NULL")
				default:
					fmt.Fprint(&b, v)
				}
			}
			out = append(out, b.String()+")")
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// sessionTables are the tables of a database that have a session column
// (all of them, in pico's schema), by name.
func sessionTables(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) c
		WHERE m.type='table' AND c.name='session' ORDER BY m.name`)
	if err != nil {
		return nil, fmt.Errorf("picosim: the tables with sessions: %w", err)
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		tables = append(tables, t)
	}
	return tables, rows.Err()
}
