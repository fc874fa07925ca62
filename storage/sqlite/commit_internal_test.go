package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pico-go/pico/storage"
)

// fillDisk makes the database unable to grow (its page limit is its size
// now) and returns the function that lifts the limit again.
func fillDisk(t *testing.T, s *Store) (lift func()) {
	t.Helper()
	ctx := context.Background()
	var pages int
	if err := s.w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `PRAGMA max_page_count=`+strconv.Itoa(pages)); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := s.w.ExecContext(ctx, `PRAGMA max_page_count=1073741823`); err != nil {
			t.Fatal(err)
		}
	}
}

func bigEntry(id, conv ID) storage.Write {
	return storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: id, ConversationID: conv, Kind: "user", Key: strings.Repeat("k", 64<<10)}}
}

// What a commit learns of conversations and tasks is kept for the next
// commit, but not what a commit that rolled back wrote: the next commit
// checks its batch against what is stored, so a write to a conversation or
// task the failed batch created is refused, and the writer's connection is
// not left inside a transaction.
func TestACommitThatRollsBackLeavesNothingForTheNextCommitsCheck(t *testing.T) {
	ctx := context.Background()
	s, _ := openOne(t) // conversation 1 at seq 1
	defer s.Close(ctx)
	lift := fillDisk(t, s)
	_, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 2}},
		{Type: storage.WriteTask, Task: &storage.Task{ID: 3, ConversationID: 1, Kind: "k", Status: "queued", Role: storage.RoleStart}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 4, ConversationID: 1, Kind: "note"}},
		bigEntry(5, 2),
	}})
	if err == nil || s.LastSeq() != 1 {
		t.Fatalf("commit on a full database = %v, lastSeq %d; want a failure and nothing stored", err, s.LastSeq())
	}
	lift()
	var inTx bool
	if err := s.w.Raw(func(dc any) error {
		inTx = !dc.(interface{ AutoCommit() bool }).AutoCommit()
		return nil
	}); err != nil || inTx {
		t.Fatalf("after the failed commit the writer connection is in a transaction: %t (%v)", inTx, err)
	}
	for _, w := range []storage.Write{
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 2, ConversationID: 2, Kind: "user"}},
		{Type: storage.WritePatch, ID: 3, Status: "running", Role: storage.RoleInflight},
	} {
		_, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{w}})
		var be *storage.BatchError
		if !errors.As(err, &be) || s.LastSeq() != 1 {
			t.Errorf("%s after the batch that created its target rolled back = %v, lastSeq %d; want a BatchError", w.Type, err, s.LastSeq())
		}
	}
	if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 2}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 3, ConversationID: 1, Kind: "note"}},
	}}); err != nil {
		t.Fatalf("creating conversation 2 and a note once there is room = %v", err)
	}
	if kinds, err := s.EntryKinds(ctx); err != nil || !slices.Contains(kinds, "note") {
		t.Fatalf("entry kinds = %v, %v; want the note's kind listed", kinds, err)
	}
}

// The commit memo never holds much more than commitMemoMax records however
// many state keys the session writes.
func TestTheCommitMemoIsBounded(t *testing.T) {
	ctx := context.Background()
	s, _ := openOne(t)
	defer s.Close(ctx)
	const perBatch = 50
	peak := 0
	for b := range 2 * commitMemoMax / perBatch {
		batch := storage.CommitBatch{Kind: storage.BatchMain}
		for i := range perBatch {
			a := storage.ConversationValue[int]("n", storage.Sticky).In(1).WithKey(strconv.Itoa(b*perBatch + i)).Address
			batch.Writes = append(batch.Writes, storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: json.RawMessage(`1`)})
		}
		if _, err := s.Commit(ctx, batch); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, s.memo.size())
	}
	if peak > commitMemoMax+perBatch+1 || peak < commitMemoMax {
		t.Fatalf("the memo held up to %d records; want it to reach %d and go no further than a batch past it", peak, commitMemoMax)
	}
}

// Settling a task forgets its scratch keys, whose rows the settle deletes,
// and only its own: another live task's scratch is still known, and both
// tasks' scratch reads as the memory backend's would.
func TestASettleForgetsOnlyItsOwnScratchKeys(t *testing.T) {
	ctx := context.Background()
	s, _ := openOne(t) // conversation 1 at seq 1
	defer s.Close(ctx)
	commit := func(b storage.CommitBatch) {
		t.Helper()
		if _, err := s.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	task := func(id ID) storage.Write {
		return storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: id, ConversationID: 1, Kind: "k", Status: "running", Role: storage.RoleInflight}}
	}
	commit(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{task(2), task(3)}})
	frames := func(task ID) storage.Address {
		return storage.ScratchList[string]("frames").In(task).Address
	}
	value := func(task ID) storage.Address {
		return storage.ScratchValue[string]("v").In(task).Address
	}
	for _, id := range []ID{2, 3} {
		a, v := frames(id), value(id)
		commit(storage.CommitBatch{Kind: storage.BatchScratch, Task: id, Writes: []storage.Write{
			{Type: storage.WriteListAppend, Addr: &a, Value: json.RawMessage(`"f"`)},
			{Type: storage.WriteValueSet, Addr: &v, Value: json.RawMessage(`"v"`)},
		}})
	}
	commit(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteSettle, ID: 2, Status: "done", Role: storage.RoleTerminal}}})
	a2, a3 := frames(2), frames(3)
	for _, tc := range []struct {
		table string
		key   storage.Address
		want  int
	}{
		{"list_elements", a2, 0}, {"value_versions", value(2), 0}, {"values_index", a2, 0}, {"values_index", value(2), 0},
		{"list_elements", a3, 1}, {"value_versions", value(3), 1}, {"values_index", a3, 1}, {"values_index", value(3), 1},
	} {
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+tc.table+` WHERE session='s' AND state_key=?`, tc.key.StateKey()).Scan(&n); err != nil || n != tc.want {
			t.Errorf("%s holds %d rows of %s (%v); want %d", tc.table, n, tc.key.StateKey(), err, tc.want)
		}
	}
	if _, ok := s.memo.infos[a2.StateKey()]; ok {
		t.Error("the settled task's scratch key is still in the memo")
	}
	if _, ok := s.memo.latest[value(2).StateKey()]; ok {
		t.Error("the settled task's scratch value is still in the memo")
	}
	if info := s.memo.infos[a3.StateKey()]; info == nil || !info.list {
		t.Errorf("the live task's scratch key in the memo = %+v; want a list", info)
	}
	commit(storage.CommitBatch{Kind: storage.BatchScratch, Task: 3, Writes: []storage.Write{{Type: storage.WriteListAppend, Addr: &a3, Value: json.RawMessage(`"g"`)}}})
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM list_elements l JOIN values_index v ON v.session=l.session AND v.state_key=l.state_key WHERE v.scratch_task=?`, 3).Scan(&n); err != nil || n != 2 {
		t.Fatalf("task 3's scratch holds %d indexed elements (%v); want 2", n, err)
	}
}

// A commit whose context has ended stores nothing and says why; the store
// goes on.
func TestACommitWithAnEndedContextStoresNothing(t *testing.T) {
	s, _ := openOne(t)
	defer s.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Commit(ctx, entry(2, "k")); !errors.Is(err, context.Canceled) || s.LastSeq() != 1 {
		t.Fatalf("commit with a cancelled context = %v, lastSeq %d; want context.Canceled and nothing stored", err, s.LastSeq())
	}
	if r, err := s.Commit(context.Background(), entry(2, "k")); err != nil || r.First != 2 {
		t.Fatalf("the next commit = %+v, %v", r, err)
	}
}

// A database Open creates has pages of pageSize; one made with another
// size keeps it, and is written and read back as well.
func TestANewDatabaseHasSmallPagesAndAnOldOneKeepsItsOwn(t *testing.T) {
	ctx := context.Background()
	pageSizeOf := func(path string) int {
		t.Helper()
		db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	s, path := openOne(t)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pageSizeOf(path); got != pageSize {
		t.Errorf("a new database has pages of %d bytes; want %d", got, pageSize)
	}

	old := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite3", "file:"+old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `PRAGMA page_size=4096; PRAGMA journal_mode=WAL`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for round := range 2 {
		s, err := Open(ctx, old, Options{Session: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
				{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
				{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 2, ConversationID: 1, Kind: "user", Key: "old"}},
			}}); err != nil {
				t.Fatal(err)
			}
		} else if got, err := s.GetEntries(ctx, []ID{2}); err != nil || got[2] == nil || got[2].Key != "old" {
			t.Fatalf("reopened: entry 2 = %+v, %v", got[2], err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := pageSizeOf(old); got != 4096 {
		t.Errorf("a database made with 4,096-byte pages has %d-byte pages after pico wrote it", got)
	}
}

// A last_seq that holds the handle's number written another way (edited by
// hand) is the handle's own: the commit goes on and writes it plainly. A
// batch refused after the claim leaves it as it was.
func TestLastSeqIsComparedAsANumber(t *testing.T) {
	ctx := context.Background()
	s, _ := openOne(t)
	defer s.Close(ctx)
	if _, err := s.db.ExecContext(ctx, `UPDATE session_metadata SET value='01' WHERE session='s' AND key='last_seq'`); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Commit(ctx, entry(2, "k")); err != nil || r.First != 2 {
		t.Fatalf("commit over last_seq '01' = %+v, %v; want it at 2", r, err)
	}
	stored := func() string {
		t.Helper()
		var v string
		if err := s.db.QueryRowContext(ctx, `SELECT value FROM session_metadata WHERE session='s' AND key='last_seq'`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := stored(); got != "2" {
		t.Fatalf("last_seq after the commit = %q; want \"2\"", got)
	}
	var be *storage.BatchError
	if _, err := s.Commit(ctx, entry(2, "again")); !errors.As(err, &be) {
		t.Fatalf("a second entry 2 = %v; want a BatchError", err)
	}
	if got := stored(); got != "2" || s.LastSeq() != 2 {
		t.Fatalf("after a refused batch last_seq is %q (handle %d); want \"2\"", got, s.LastSeq())
	}
}

// Reads share the commits' memo: what one learns (a key that is not there)
// serves the reads and commits after it, until a commit writes the key; a
// memo that is full gets nothing more from reads. Reads run side by side
// (go test -race checks they share it safely).
func TestReadsShareTheCommitMemo(t *testing.T) {
	ctx := context.Background()
	s, _ := openOne(t)
	defer s.Close(ctx)
	key := storage.ConversationValue[int]("n", storage.Sticky).In(1).WithKey("later").Address
	done := make(chan error)
	for range 4 {
		go func() {
			_, ok, err := s.GetValue(ctx, key, 0)
			if ok {
				err = errors.New("a value before any was written")
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if info, ok := s.memo.infos[key.StateKey()]; !ok || info != nil {
		t.Fatalf("after the reads the memo has %+v, %t for the key; want it known to be absent", info, ok)
	}
	if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteValueSet, Addr: &key, Value: json.RawMessage(`7`)}}}); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.GetValue(ctx, key, 0); err != nil || !ok || string(v.Value) != "7" {
		t.Fatalf("the value once written = %+v, %t, %v; want 7", v, ok, err)
	}
	for i := 0; s.memo.size() < commitMemoMax; i++ {
		s.memo.kinds[strconv.Itoa(i)] = true
	}
	other := storage.ConversationValue[int]("n", storage.Sticky).In(1).WithKey("other").Address
	if _, _, err := s.GetValue(ctx, other, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.memo.infos[other.StateKey()]; ok || s.memo.size() != commitMemoMax {
		t.Fatalf("a read added to a full memo (%d records)", s.memo.size())
	}
}

// endsAfterFirstLook is a context that has not ended when first asked and
// has ended (its deadline passed) every time after: as if it ended while
// SQLite waited for the write lock, a wait that does not watch it.
type endsAfterFirstLook struct {
	context.Context
	looked bool
}

func (c *endsAfterFirstLook) Err() error {
	if !c.looked {
		c.looked = true
		return nil
	}
	return context.DeadlineExceeded
}

// A commit whose context ended while it waited for the database's write
// lock gives the lock back and stores nothing: it does not land after its
// caller gave up. The store goes on.
func TestACommitWhoseContextEndedWhileItWaitedStoresNothing(t *testing.T) {
	s, _ := openOne(t)
	defer s.Close(context.Background())
	ctx := &endsAfterFirstLook{Context: context.Background()}
	if _, err := s.Commit(ctx, entry(2, "late")); !errors.Is(err, context.DeadlineExceeded) || s.LastSeq() != 1 {
		t.Fatalf("commit whose deadline passed in BEGIN = %v, lastSeq %d; want DeadlineExceeded and nothing stored", err, s.LastSeq())
	}
	if !ctx.looked {
		t.Fatal("the commit never looked at its context")
	}
	if got, err := s.GetEntries(context.Background(), []ID{2}); err != nil || len(got) != 0 {
		t.Fatalf("entry 2 = %v, %v; want none", got, err)
	}
	if r, err := s.Commit(context.Background(), entry(2, "k")); err != nil || r.First != 2 {
		t.Fatalf("the next commit = %+v, %v", r, err)
	}
}

// A writer connection left inside its transaction (a ROLLBACK that failed)
// is closed, which gives the database's write lock back to other sessions'
// writers; the store is poisoned and still closes cleanly.
func TestAWriterLeftInItsTransactionIsDiscarded(t *testing.T) {
	ctx := context.Background()
	s, path := openOne(t)
	if _, err := s.w.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	s.discardWriter(errors.New("rollback failed"))
	other, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, `BEGIN IMMEDIATE; ROLLBACK`); err != nil {
		t.Fatalf("another writer after the discard: %v; want the write lock free", err)
	}
	var pe *storage.PoisonedError
	if _, err := s.Commit(ctx, entry(2, "k")); !errors.As(err, &pe) || !strings.Contains(err.Error(), "rollback failed") {
		t.Fatalf("commit after the discard = %v; want a PoisonedError naming the rollback", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close after the discard = %v", err)
	}
}

// A patch that carries no state (an abort mark, a claim, a new status)
// leaves the stored state as it was, though the memo the patch starts from
// keeps no task's state.
func TestAPatchWithoutStateKeepsTheStoredState(t *testing.T) {
	ctx := context.Background()
	s, _ := openOne(t) // conversation 1 at seq 1
	defer s.Close(ctx)
	commit := func(ws ...storage.Write) {
		t.Helper()
		if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: ws}); err != nil {
			t.Fatal(err)
		}
	}
	commit(storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 2, ConversationID: 1, Kind: "k", Status: "queued", Role: storage.RoleStart, State: json.RawMessage(`{"a":1}`)}})
	if tk := s.memo.tasks[2]; tk == nil || tk.State != nil {
		t.Fatalf("the memo's task 2 = %+v; want it without its state", tk)
	}
	commit(storage.Write{Type: storage.WritePatch, ID: 2, Abort: true})
	commit(storage.Write{Type: storage.WritePatch, ID: 2, Status: "running", Role: storage.RoleInflight})
	commit(storage.Write{Type: storage.WriteSettle, ID: 2, Status: "done", Role: storage.RoleTerminal})
	got, err := s.GetTasks(ctx, []ID{2})
	if err != nil || got[2] == nil || string(got[2].State) != `{"a":1}` || !got[2].Abort || got[2].Status != "done" {
		t.Fatalf("task 2 after patches without state = %+v, %v; want state {\"a\":1}, aborted, done", got[2], err)
	}
}

// The write-ahead log grows to about walCheckpointPages pages before a
// commit checkpoints it (SQLite's default would at 1,000), and no further:
// over commits that write twice that, it is checkpointed and reused from
// its start, so its file never holds more.
func TestTheLogIsCheckpointedAtItsPageBound(t *testing.T) {
	ctx := context.Background()
	s, path := openOne(t)
	defer s.Close(ctx)
	frame := int64(pageSize + 24) // a page and its frame header
	largest := int64(0)
	for range 2 * walCheckpointPages / 30 { // each entry spans about 30 pages
		id := s.LastSeq() + 1
		if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
			{Type: storage.WriteEntry, Entry: &storage.Entry{ID: id, ConversationID: 1, Kind: "user", Key: strings.Repeat("k", 30<<10)}},
		}}); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, info.Size()/frame)
	}
	if largest < walCheckpointPages*9/10 || largest > walCheckpointPages+128 { // past it by at most the commit that crossed it
		t.Fatalf("the log grew to %d pages; want about %d, where a commit checkpoints it", largest, walCheckpointPages)
	}
}

// queryPlan is SQLite's plan for query, one line per step.
func queryPlan(t *testing.T, db *sql.DB, query string, args []any) string {
	t.Helper()
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var steps []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, detail)
	}
	return strings.Join(steps, "; ")
}

// Live tasks are read through the live index, with or without a
// conversation or a live role, so that no terminal row is visited; an
// entry key through the keyed index. A database written before them has
// its full indexes replaced by the writer's open.
func TestQueriesUseThePartialIndexes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(ctx, path, Options{Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	// As a database of an earlier version has it.
	for _, ddl := range []string{`DROP INDEX tasks_live`, `DROP INDEX entries_keyed`, `CREATE INDEX tasks_role ON tasks(session, role, id)`,
		`CREATE INDEX tasks_conv_role ON tasks(session, conv, role, id)`, `CREATE INDEX entries_key ON entries(session, conv, key, id)`} {
		if _, err := s.w.ExecContext(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(ctx, path, Options{Session: "s"}); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	var indexes []string
	rows, err := s.db.Query(`SELECT name FROM sqlite_schema WHERE type='index' AND tbl_name IN ('tasks','entries') AND sql IS NOT NULL ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		indexes = append(indexes, name)
	}
	rows.Close()
	if got, want := strings.Join(indexes, " "), "entries_conv entries_heads entries_keyed entries_kind_key tasks_conv tasks_live"; got != want {
		t.Fatalf("indexes after the open: %s; want %s", got, want)
	}
	yes := true
	cursor := storage.Cursor{}.Defaulted()
	for name, q := range map[string]storage.TaskQuery{
		"live":                       {Cursor: cursor, Live: &yes},
		"live in a conversation":     {Cursor: cursor, Live: &yes, ConversationIDs: []ID{1}},
		"live in two, backward":      {Cursor: storage.Cursor{Before: 50, Limit: 5}, Live: &yes, ConversationIDs: []ID{1, 2}},
		"inflight in a conversation": {Cursor: cursor, Role: storage.RoleInflight, ConversationIDs: []ID{1}},
		"start of a kind":            {Cursor: cursor, Role: storage.RoleStart, Kind: "tool"},
	} {
		query, args := taskQuery("s", q)
		if plan := queryPlan(t, s.db, query, args); !strings.Contains(plan, "USING INDEX tasks_live") {
			t.Errorf("%s: the plan is %q; want it through tasks_live", name, plan)
		}
	}
	query, args := entryQuery("s", storage.EntryQuery{Key: "call_1"}, 1, 1, 100, false, 10)
	if plan := queryPlan(t, s.db, query, args); !strings.Contains(plan, "INDEX entries_keyed") {
		t.Errorf("an entry key: the plan is %q; want it through entries_keyed", plan)
	}
}

// Options.CommitFault fails a commit after its statements ran, before its
// COMMIT: the transaction rolls back whole, nothing of the batch reads
// back (the memo forgets what it wrote), and the next commit lands.
func TestCommitFaultFailsTheCommitBeforeItsCOMMIT(t *testing.T) {
	ctx := context.Background()
	s, _ := openOne(t) // conversation 1 at seq 1
	defer s.Close(ctx)
	full := errors.New("disk full")
	asked := 0
	s.commitFault = func() error {
		asked++
		if asked == 1 {
			return full
		}
		return nil
	}
	_, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteTask, Task: &storage.Task{ID: 2, ConversationID: 1, Kind: "k", Status: "queued", Role: storage.RoleStart}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 3, ConversationID: 1, Kind: "note"}},
	}})
	if !errors.Is(err, full) || s.LastSeq() != 1 {
		t.Fatalf("commit failed by the fault = %v, lastSeq %d; want the fault's error and nothing stored", err, s.LastSeq())
	}
	tasks, terr := s.GetTasks(ctx, []ID{2})
	entries, eerr := s.GetEntries(ctx, []ID{3})
	kinds, kerr := s.EntryKinds(ctx)
	if len(tasks) != 0 || len(entries) != 0 || slices.Contains(kinds, "note") || errors.Join(terr, eerr, kerr) != nil {
		t.Fatalf("after the failed commit: tasks %v, entries %v, kinds %v (%v); want none of the batch", tasks, entries, kinds, errors.Join(terr, eerr, kerr))
	}
	if r, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 2, ConversationID: 1, Kind: "user"}},
	}}); err != nil || r.First != 2 || asked != 2 {
		t.Fatalf("the next commit = %+v, %v (the fault asked %d times); want it at 2", r, err, asked)
	}
}

// The memo keeps each small value's newest version as commits write it,
// and answers from it reads at or above that version; a read below it,
// and every read of a large value, asks the database. Every answer is the
// database's.
func TestTheValueMemoKeepsSmallNewestVersions(t *testing.T) {
	ctx := context.Background()
	s, path := openOne(t) // conversation 1 at seq 1
	defer s.Close(ctx)
	rewind := storage.ConversationValue[string]("r", storage.Rewind).In(1).Address
	big := storage.ConversationValue[string]("big", storage.Sticky).In(1).Address
	large := json.RawMessage(`"` + strings.Repeat("x", valueMemoMax) + `"`)
	write := func(a storage.Address, typ storage.WriteType, v json.RawMessage) ID {
		t.Helper()
		r, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: typ, Addr: &a, Value: v}}})
		if err != nil {
			t.Fatal(err)
		}
		return r.First
	}
	entry := func() ID {
		t.Helper()
		r, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteEntry,
			Entry: &storage.Entry{ID: s.LastSeq() + 1, ConversationID: 1, Kind: "user", Data: json.RawMessage(`{}`)}}}})
		if err != nil {
			t.Fatal(err)
		}
		return r.First
	}
	first := write(rewind, storage.WriteValueSet, json.RawMessage(`"one"`))
	at := entry()
	second := write(rewind, storage.WriteValueSet, json.RawMessage(`"two"`))
	write(big, storage.WriteValueSet, large)
	if m := s.memo.latest[rewind.StateKey()]; m == nil || m.seq != second || string(m.value) != `"two"` {
		t.Fatalf("the memo's newest version of r = %+v; want %q at %d", m, "two", second)
	}
	if _, ok := s.memo.latest[big.StateKey()]; ok {
		t.Fatal("the memo keeps a value larger than valueMemoMax")
	}
	ro, err := Open(ctx, path, Options{Session: "s", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close(ctx)
	for _, tc := range []struct {
		a    storage.Address
		at   ID
		want string
		seq  ID
	}{{rewind, 0, `"two"`, second}, {rewind, at, `"one"`, first}, {big, 0, string(large), second + 1}} {
		got, ok, err := s.GetValue(ctx, tc.a, tc.at)
		file, fok, ferr := ro.GetValue(ctx, tc.a, tc.at)
		if err != nil || ferr != nil || !ok || !fok || string(got.Value) != tc.want || got.Seq != tc.seq || string(file.Value) != tc.want || file.Seq != tc.seq {
			t.Errorf("GetValue(%s at %d) = %d %.20s (%v), the file %d %.20s (%v); want %.20s at %d", tc.a.StateKey(), tc.at, got.Seq, got.Value, err, file.Seq, file.Value, ferr, tc.want, tc.seq)
		}
	}
	write(rewind, storage.WriteValueDelete, nil)
	if _, ok, err := s.GetValue(ctx, rewind, 0); ok || err != nil {
		t.Errorf("r after its delete reads %v, %v; want nothing", ok, err)
	}
}
