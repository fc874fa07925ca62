package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/sqlite"
)

// sessionOnDisk leaves a finished scenario's session files in a directory.
func sessionOnDisk(t *testing.T, name, backend string) string {
	t.Helper()
	dir := t.TempDir()
	sc, _ := findScenario(name)
	res, err := runScenarioIn(dir, runSpec{sc: sc, seed: 1, backend: backend, strategy: "random"}, nil)
	if err != nil || !res.OK {
		t.Fatalf("%s on %s: %v %s", name, backend, err, res.Error)
	}
	if backend == "jsonl" {
		return filepath.Join(dir, "session.jsonl")
	}
	return filepath.Join(dir, "sessions.db")
}

func TestCheckPassesValidSessionsAndNeverWrites(t *testing.T) {
	for _, backend := range []string{"jsonl", "sqlite"} {
		for _, name := range []string{"input-while-busy", "shutdown-queued", "crash-reopen"} {
			path := sessionOnDisk(t, name, backend)
			before, _ := os.ReadFile(path)
			var out, errOut bytes.Buffer
			if code := checkMain(context.Background(), []string{path}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "✓ ") {
				t.Fatalf("%s on %s: exit %d\n%s%s", name, backend, code, out.String(), errOut.String())
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatalf("%s on %s: check changed the session file", name, backend)
			}
		}
	}
}

// A session a torn crash cut mid-line, restarted and driven on, is valid.
func TestCheckPassesASessionRestartedAfterATornCrash(t *testing.T) {
	dir := t.TempDir()
	sc, _ := findScenario("input-while-busy")
	plan := fault.Plan{Faults: []fault.Fault{{Name: "torn", Kind: fault.Crash, Commit: 9, Tear: 3}}}
	res, err := runScenarioIn(dir, runSpec{sc: sc, seed: 2, backend: "jsonl", strategy: "random", plan: plan}, nil)
	if err != nil || !res.OK || !res.Recovered {
		t.Fatalf("%v %s (recovered %v)", err, res.Error, res.Recovered)
	}
	var out, errOut bytes.Buffer
	if code := checkMain(context.Background(), []string{filepath.Join(dir, "session.jsonl")}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

func TestCheckNamesTheOffendingLineOfACorruptedSession(t *testing.T) {
	path := sessionOnDisk(t, "parallel-tools", "jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(data, []byte("\n"))
	// Hand-edit line 4: its batch now claims ids that overlap the previous one.
	lines[3] = bytes.Replace(lines[3], []byte(`{"first":`), []byte(`{"first":1,"x":`), 1)
	if err := os.WriteFile(path, bytes.Join(lines, []byte("\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	var out, errOut bytes.Buffer
	code := checkMain(context.Background(), []string{path}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "line 4") || !strings.Contains(out.String(), path) {
		t.Fatalf("exit %d, %q; want exit 1 naming %s line 4", code, out.String(), path)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("check changed the corrupted file")
	}
	if code := checkMain(context.Background(), []string{filepath.Join(t.TempDir(), "missing.jsonl")}, &out, &errOut); code != 2 {
		t.Fatalf("a missing session: exit %d; want 2", code)
	}
	// A directory, such as a --keep directory passed whole, is a mistake
	// of use that names the file to pass, not an empty session.
	errOut.Reset()
	if code := checkMain(context.Background(), []string{t.TempDir()}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "is a directory; pass the session file in it") {
		t.Fatalf("a directory: exit %d, stderr %q; want 2 naming the file to pass", code, errOut.String())
	}
}

// Each batch of a JSONL history is held to the harness's rules against the
// session before it: a hand-edited input result that moves backwards is
// named with its line and rule, though every batch still parses.
func TestCheckHoldsEveryBatchToTheHarnessRules(t *testing.T) {
	path := sessionOnDisk(t, "parallel-tools", "jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(data, []byte("\n"))
	edited := -1
	for i, l := range lines {
		if bytes.Contains(l, []byte(`"namespace":"pi.inputResult"`)) && bytes.Contains(l, []byte(`"status":"done"`)) {
			lines[i], edited = bytes.Replace(l, []byte(`"status":"done"`), []byte(`"status":"queued"`), 1), i
			break
		}
	}
	if edited < 0 {
		t.Fatal("the session has no finished input")
	}
	if err := os.WriteFile(path, bytes.Join(lines, []byte("\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := checkMain(context.Background(), []string{path}, &out, &errOut)
	want := fmt.Sprintf("%s: line %d: ", path, edited+1)
	if code != 1 || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "input-result-transition") || !strings.Contains(out.String(), "from running to queued") {
		t.Fatalf("exit %d, %q; want exit 1 naming %s and the input-result rule", code, out.String(), want)
	}
}

func checkOut(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := checkMain(context.Background(), args, &out, &errOut)
	return code, out.String() + errOut.String()
}

// The false greens a new user found, each now a failure that says why.

func TestCheckOfAnAbsentSQLiteSessionListsTheSessionsTheFileHolds(t *testing.T) {
	path := sessionOnDisk(t, "basic-turn", "sqlite")
	before, _ := os.ReadFile(path)
	code, out := checkOut(t, path, "--session", "nosuch")
	if code != 1 || !strings.Contains(out, `no session "nosuch"`) || !strings.Contains(out, `"picosim"`) {
		t.Fatalf("exit %d, %q; want exit 1 naming the absent session and listing \"picosim\"", code, out)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("check changed the database")
	}
}

// An index page overwritten with an older copy of itself loses rows from
// the index while every row still decodes: SQLite's integrity check finds
// it.
func TestCheckRunsSQLitesIntegrityCheck(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sessions.db")
	write := func(ids ...storage.ID) {
		s, err := sqlite.Open(ctx, path, sqlite.Options{Session: "picosim"})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			w := storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: id, ConversationID: 1, Kind: "notice"}}
			if id == 1 {
				w = storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}
			}
			if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{w}}); err != nil {
				t.Fatal(err)
			}
		}
		s.Close(ctx) // the last connection checkpoints the WAL into the file
	}
	write(1, 2, 3)
	older, _ := os.ReadFile(path)
	write(4, 5, 6, 7)
	newer, _ := os.ReadFile(path)
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var root, pageSize int
	if err := db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name='entries_conv'`).Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	db.Close()
	at := (root - 1) * pageSize
	copy(newer[at:at+pageSize], older[at:at+pageSize])
	if err := os.WriteFile(path, newer, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := checkOut(t, path)
	if code != 1 || !strings.Contains(out, "integrity_check") {
		t.Fatalf("exit %d, %q; want exit 1 with SQLite's integrity check findings", code, out)
	}
}

func TestCheckCatchesALastSequenceBelowAStoredID(t *testing.T) {
	path := sessionOnDisk(t, "basic-turn", "sqlite")
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE session_metadata SET value='3' WHERE session='picosim' AND key='last_seq'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if code, out := checkOut(t, path); code != 1 || !strings.Contains(out, "the last sequence is 3 but id") {
		t.Fatalf("exit %d, %q; want exit 1 naming the stale last sequence", code, out)
	}
}

// Totals that are not the sum of the usage rows (a row the totals left
// out) are named, with both figures.
func TestCheckCatchesUsageTotalsThatAreNotTheRowsSum(t *testing.T) {
	path := sessionOnDisk(t, "basic-turn", "sqlite")
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec(`UPDATE value_versions SET value=json_set(value, '$.input', json_extract(value, '$.input') - 1)
		WHERE session='picosim' AND state_key IN (SELECT state_key FROM values_index WHERE session='picosim' AND scope_ns LIKE '%"pi.usage.totals"')`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatal("the session stores no usage totals")
	}
	db.Close()
	if code, out := checkOut(t, path); code != 1 || !strings.Contains(out, "the usage totals are") || !strings.Contains(out, "usage rows add up to") {
		t.Fatalf("exit %d, %q; want exit 1 naming the totals and the rows' sum", code, out)
	}
}

// Deleting the line that settles a tool leaves its exchange settled with a
// live tool and an unanswered call, though every remaining line replays.
func TestCheckCatchesALiveToolAfterItsPostToolsSettled(t *testing.T) {
	path := sessionOnDisk(t, "parallel-tools", "jsonl")
	data, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(data, []byte("\n"))
	cut := -1
	for i, l := range lines {
		if bytes.Contains(l, []byte(`"type":"settle"`)) && bytes.Contains(l, []byte(`"kind":"tool_result"`)) {
			cut = i
			break
		}
	}
	if cut < 0 {
		t.Fatal("no line settles a tool")
	}
	os.WriteFile(path, bytes.Join(append(lines[:cut:cut], lines[cut+1:]...), nil), 0o600)
	code, out := checkOut(t, path)
	if code != 1 || !strings.Contains(out, "still live after its post_tools") || !strings.Contains(out, "has no result though its exchange settled") {
		t.Fatalf("exit %d, %q; want exit 1 naming the live tool and the unanswered call", code, out)
	}
}

func TestCheckWarnsOfATornTailWithItsOffset(t *testing.T) {
	path := sessionOnDisk(t, "basic-turn", "jsonl")
	data, _ := os.ReadFile(path)
	os.WriteFile(path, append(data, `{"first":99,"wri`...), 0o600)
	code, out := checkOut(t, path)
	want := fmt.Sprintf("torn final line of 16 bytes at offset %d", len(data))
	if code != 0 || !strings.Contains(out, "! "+path+": warning: ") || !strings.Contains(out, want) {
		t.Fatalf("exit %d, %q; want exit 0 with a warning %q", code, out, want)
	}
	if after, _ := os.ReadFile(path); len(after) != len(data)+16 {
		t.Fatal("check cut the original's torn tail")
	}
}

// The backend is told by content: a JSONL session named .db and a
// database named .jsonl are each checked as what they are, and anything
// else is not a session.
func TestCheckToldTheBackendByContent(t *testing.T) {
	dir := t.TempDir()
	j, db := sessionOnDisk(t, "basic-turn", "jsonl"), sessionOnDisk(t, "basic-turn", "sqlite")
	renamedJ, renamedDB := filepath.Join(dir, "looks-like.db"), filepath.Join(dir, "looks-like.jsonl")
	copyFileOrFail(t, j, renamedJ)
	copyFileOrFail(t, db, renamedDB)
	for _, p := range []string{renamedJ, renamedDB} {
		if code, out := checkOut(t, p); code != 0 {
			t.Fatalf("%s: exit %d, %q", p, code, out)
		}
	}
	notes := filepath.Join(dir, "notes.jsonl")
	os.WriteFile(notes, []byte(`{"title":"groceries"}`+"\n"), 0o600)
	if code, out := checkOut(t, notes); code != 1 || !strings.Contains(out, "not a pico session") {
		t.Fatalf("notes: exit %d, %q; want exit 1, not a pico session", code, out)
	}
}

func copyFileOrFail(t *testing.T, from, to string) {
	t.Helper()
	if err := copyFile(from, to); err != nil {
		t.Fatal(err)
	}
}

// A session its writer holds open is checked on a copy: the writer's lock
// is no obstacle, and a scratch file that vanishes while it is copied (its
// task settled) is skipped, not an error.
func TestCheckOfALiveSessionUsesACopy(t *testing.T) {
	ctx := context.Background()
	path := sessionOnDisk(t, "basic-turn", "jsonl")
	live, err := jsonl.Open(ctx, path, jsonl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close(ctx)
	if code, out := checkOut(t, path); code != 0 {
		t.Fatalf("check beside the live writer: exit %d, %q", code, out)
	}
	scratch := filepath.Join(t.TempDir(), "s.scratch")
	os.MkdirAll(scratch, 0o700)
	os.Symlink(filepath.Join(scratch, "gone"), filepath.Join(scratch, "7")) // reads as a file that vanished
	if err := copyDir(scratch, filepath.Join(t.TempDir(), "copy")); err != nil {
		t.Fatalf("copying a directory whose file vanished: %v", err)
	}
}

// A live task after a live overflow collapse is a broken overflow chain;
// one after a threshold collapse is the threshold path, and one after a
// settled collapse waits on nothing.
func TestCheckNamesATaskWaitingOnAnOverflowCollapse(t *testing.T) {
	collapse := func(id storage.ID, reason agent.CollapseReason, status string) *storage.Task {
		state, _ := json.Marshal(agent.CollapseState{Reason: reason})
		return &storage.Task{ID: id, Kind: agent.CollapseKindName, Status: status, Role: map[string]storage.TaskRole{"pending": storage.RoleStart, "done": storage.RoleTerminal}[status], State: state}
	}
	gen := func(id storage.ID, after ...storage.ID) *storage.Task {
		return &storage.Task{ID: id, Kind: agent.GenerationKindName, Status: "pending", Role: storage.RoleStart, After: after}
	}
	live := []*storage.Task{collapse(10, agent.CollapseOverflow, "pending"), collapse(11, agent.CollapseThreshold, "pending"), gen(12, 10), gen(13, 11)}
	problems := collapseWaitProblems(live)
	if len(problems) != 1 || !strings.Contains(problems[0], "task 12 (generation) waits on overflow collapse 10") {
		t.Fatalf("problems = %q; want task 12 named, waiting on collapse 10", problems)
	}
}

// check's progress line names the phase and counts what it has done: on a
// terminal one redrawn line, elsewhere plain lines.
func TestCheckProgressSaysWhatItHasDone(t *testing.T) {
	var prog checkProgress
	var plain bytes.Buffer
	p := newProgressLine(&plain, "check", prog.status)
	start := p.start
	p.tick(start)
	prog.phase("replaying")
	for range 3 {
		prog.batch()
	}
	p.tick(start.Add(10 * time.Second))
	prog.phase("checking conversations")
	prog.conversations(4)
	prog.conversation()
	p.tick(start.Add(20 * time.Second))
	p.finish()
	want := "check: starting, 0s\ncheck: replaying, 3 batches replayed, 10s\ncheck: checking conversations, 3 batches replayed, conversation 1 of 4, 20s\n"
	if plain.String() != want {
		t.Fatalf("plain progress:\n%s\nwant:\n%s", plain.String(), want)
	}
	var term bytes.Buffer
	tp := &progressLine{w: &term, terminal: true, name: "check", status: prog.status, start: start}
	tp.tick(start.Add(time.Second))
	tp.finish()
	if got := term.String(); !strings.HasPrefix(got, "\rcheck: checking conversations") || !strings.HasSuffix(got, "\r\033[K") || strings.Contains(got, "\n") {
		t.Fatalf("terminal progress %q; want one redrawn line, cleared at the end", got)
	}
	var nilProg *checkProgress // what a run's own final check passes
	nilProg.phase("x")
	nilProg.batch()
	nilProg.conversations(1)
	nilProg.conversation()
}
