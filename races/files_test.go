package races

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
	"github.com/pico-go/pico/storage/sqlite"
)

// The rows in this file are about what storage keeps (on disk, or refuses
// to keep) rather than about interleavings. Each cell is one actor, main,
// that passes one forced point naming the order's scenario and then works
// on files in a fresh temporary directory; nothing it records depends on
// the directory's name, so a run replays byte for byte. Their outcome does
// not depend on the seed, so such rows run fileSeeds seeds only: enough to
// check replay and seed independence without redoing file work 200 times.
const fileSeeds = 2

// backend is one storage backend a file row runs on. open opens the
// session kept in dir; on a durable backend, opening again finds it.
type backend struct {
	name    string
	durable bool
	open    func(ctx context.Context, dir string) (storage.Storage, error)
}

var backends = []backend{
	{name: "memory", open: func(context.Context, string) (storage.Storage, error) { return memory.New(), nil }},
	{name: "jsonl", durable: true, open: func(ctx context.Context, dir string) (storage.Storage, error) {
		return openJSONL(ctx, dir)
	}},
	{name: "sqlite", durable: true, open: func(ctx context.Context, dir string) (storage.Storage, error) {
		s, err := sqlite.Open(ctx, sqlitePath(dir), sqlite.Options{Session: "s"})
		if err != nil {
			return nil, err
		}
		return s, nil
	}},
}

func jsonlPath(dir string) string  { return filepath.Join(dir, "s.jsonl") }
func sqlitePath(dir string) string { return filepath.Join(dir, "s.db") }
func scratchPath(dir string, task storage.ID) string {
	return filepath.Join(dir, "s.scratch", task.String())
}

func openJSONL(ctx context.Context, dir string) (*jsonl.Store, error) {
	return jsonl.Open(ctx, jsonlPath(dir), jsonl.Options{})
}

// fileCell is a cell of a file row: main passes point, then runs body in a
// fresh temporary directory; body's error is the cell's verdict.
func fileCell(point string, body func(ctx context.Context, dir string) error) cell {
	return cell{points: []string{"main:" + point}, program: func(s *sim.Sim) (func(context.Context), func() error) {
		var err error
		main := func(ctx context.Context) {
			sim.Yield(ctx, point)
			dir, derr := os.MkdirTemp("", "pico-races-")
			if derr != nil {
				err = derr
				return
			}
			defer os.RemoveAll(dir)
			err = body(ctx, dir)
			s.Record("verdict", err == nil)
		}
		return main, func() error { return err }
	}}
}

// The session of the file rows: conversation 1, live task 2 (ids are the
// sequences that create them), a conversation list and the tasks' scratch.
var fileMoves = storage.ConversationList[string]("race.moves", storage.Rewind).In(1).Address

func fileFrames(task storage.ID) storage.Address {
	return storage.ScratchList[int]("race.frames").In(task).Address
}

func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	check(err)
	return b
}

func liveTask(id storage.ID) storage.Write {
	return storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: id, ConversationID: 1, Kind: "generation", Status: "streaming", Role: storage.RoleInflight}}
}

func moveWrite(n int) storage.Write {
	return storage.Write{Type: storage.WriteListAppend, Addr: &fileMoves, Value: rawJSON(fmt.Sprintf("m%d", n))}
}

func frameWrite(task storage.ID, n int) storage.Write {
	a := fileFrames(task)
	return storage.Write{Type: storage.WriteListAppend, Addr: &a, Value: rawJSON(n)}
}

func settleWrite(task storage.ID) storage.Write {
	return storage.Write{Type: storage.WriteSettle, ID: task, Status: "done", Role: storage.RoleTerminal, State: rawJSON(map[string]any{})}
}

func mainBatch(ws ...storage.Write) storage.CommitBatch {
	return storage.CommitBatch{Kind: storage.BatchMain, Writes: ws}
}

func scratchBatch(task storage.ID, ws ...storage.Write) storage.CommitBatch {
	return storage.CommitBatch{Kind: storage.BatchScratch, Task: task, Writes: ws}
}

// commitAll commits the batches in order, failing on the first error.
func commitAll(ctx context.Context, st storage.Storage, batches ...storage.CommitBatch) (storage.Range, error) {
	var r storage.Range
	for i, b := range batches {
		var err error
		if r, err = st.Commit(ctx, b); err != nil {
			return r, fmt.Errorf("setup commit %d: %w", i, err)
		}
	}
	return r, nil
}

// fileSession commits conversation 1 and live task 2 (sequences 1–2),
// moves main list appends (one batch) and frames one-write scratch batches
// of task 2: lastSeq is 2+moves+frames.
func fileSession(ctx context.Context, st storage.Storage, moves, frames int) error {
	batches := []storage.CommitBatch{mainBatch(
		storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		liveTask(2),
	)}
	if moves > 0 {
		var ws []storage.Write
		for i := range moves {
			ws = append(ws, moveWrite(i))
		}
		batches = append(batches, mainBatch(ws...))
	}
	for i := range frames {
		batches = append(batches, scratchBatch(2, frameWrite(2, i)))
	}
	_, err := commitAll(ctx, st, batches...)
	return err
}

// fileView is everything a reader sees of the session, as one string.
func fileView(ctx context.Context, st storage.Storage, tasks ...storage.ID) (string, error) {
	all := storage.Cursor{Limit: storage.PageLimitMax}
	e, err1 := st.ScanEntries(ctx, storage.EntryQuery{Cursor: all, ConversationID: 1})
	tk, err2 := st.ScanTasks(ctx, storage.TaskQuery{Cursor: all})
	m, err3 := st.ReadList(ctx, fileMoves, storage.ListQuery{Cursor: all})
	parts := []any{st.LastSeq(), e.Items, tk.Items, m.Items}
	errs := []error{err1, err2, err3}
	if len(tasks) == 0 {
		tasks = []storage.ID{2}
	}
	for _, t := range tasks {
		f, err := st.ReadList(ctx, fileFrames(t), storage.ListQuery{Cursor: all})
		parts, errs = append(parts, f.Items), append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	out, err := json.Marshal(parts)
	return string(out), err
}

// frameCount is how many elements task's scratch list shows.
func frameCount(ctx context.Context, st storage.Storage, task storage.ID) (int, error) {
	p, err := st.ReadList(ctx, fileFrames(task), storage.ListQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}})
	return len(p.Items), err
}

// mixedBatch is the row "Main and scratch writes in one batch", on every
// backend: over a session (lastSeq 5) with live task 2, forward commits a
// main batch that carries a scratch write of task 2 after a valid main
// write; reverse commits task 2's scratch batch that carries a main
// (conversation list) write after a valid scratch write. Either way the
// commit fails with a *storage.BatchError and nothing is written: lastSeq
// and every read are unchanged, also after reopening a durable backend, and
// the next valid commit gets lastSeq+1.
func mixedBatch(o order) cell {
	point := map[order]string{forward: "main-batch-carries-scratch", reverse: "scratch-batch-carries-main"}[o]
	return fileCell(point, func(ctx context.Context, dir string) error {
		for _, b := range backends {
			if err := mixedBatchOn(ctx, b, filepath.Join(dir, b.name), o); err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
		}
		return nil
	})
}

func mixedBatchOn(ctx context.Context, b backend, dir string, o order) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	st, err := b.open(ctx, dir)
	if err != nil {
		return err
	}
	defer func() { st.Close(ctx) }()
	if err := fileSession(ctx, st, 1, 2); err != nil {
		return err
	}
	before, err := fileView(ctx, st)
	if err != nil {
		return err
	}
	mixed := mainBatch(moveWrite(100), frameWrite(2, 100))
	if o == reverse {
		mixed = scratchBatch(2, frameWrite(2, 100), moveWrite(100))
	}
	_, cerr := st.Commit(ctx, mixed)
	var be *storage.BatchError
	if !errors.As(cerr, &be) {
		return fmt.Errorf("the mixed batch committed with %v; want a *storage.BatchError", cerr)
	}
	if be.Index != 1 {
		return fmt.Errorf("the rejection names write %d (%v); want write 1, the one of the other kind", be.Index, be)
	}
	after, err := fileView(ctx, st)
	if err != nil {
		return err
	}
	if after != before {
		return fmt.Errorf("a rejected batch changed the store:\nbefore %s\nafter  %s", before, after)
	}
	if b.durable {
		if err := st.Close(ctx); err != nil {
			return err
		}
		if st, err = b.open(ctx, dir); err != nil {
			return fmt.Errorf("reopen: %w", err)
		}
		reopened, err := fileView(ctx, st)
		if err != nil {
			return err
		}
		if reopened != before {
			return fmt.Errorf("the rejected batch reached disk:\nbefore   %s\nreopened %s", before, reopened)
		}
	}
	r, err := st.Commit(ctx, mainBatch(moveWrite(101)))
	if err != nil || r.First != 6 {
		return fmt.Errorf("the next valid commit got %+v, %v; want it at 6", r, err)
	}
	return nil
}

// tornLine is the row "Torn final JSONL line" (JSONL only: the other
// backends have no lines). Over a session (lastSeq 5: main lines 1–2, two
// scratch lines of live task 2) the process dies mid-append of batch 6:
// forward, the torn line ends the main file; reverse, it ends task 2's
// scratch file. Reopening discards exactly that line: every read equals
// the state before, the file is cut back to its complete lines, and the
// next commit to that file gets 6 and survives another reopen.
func tornLine(o order) cell {
	point := map[order]string{forward: "torn-main-line", reverse: "torn-scratch-line"}[o]
	return fileCell(point, func(ctx context.Context, dir string) error {
		st, err := openJSONL(ctx, dir)
		if err != nil {
			return err
		}
		if err := fileSession(ctx, st, 1, 2); err != nil {
			return err
		}
		want, err := fileView(ctx, st)
		if err != nil {
			return err
		}
		check(st.Close(ctx))
		target, next := jsonlPath(dir), mainBatch(moveWrite(6))
		if o == reverse {
			target, next = scratchPath(dir, 2), scratchBatch(2, frameWrite(2, 6))
		}
		complete, err := os.ReadFile(target)
		if err != nil {
			return err
		}
		if err := appendFile(target, `{"first":6,"writes":[{"type":"listAp`); err != nil {
			return err
		}
		if st, err = openJSONL(ctx, dir); err != nil {
			return fmt.Errorf("open after a torn final line: %w", err)
		}
		got, err := fileView(ctx, st)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("reopened over a torn line:\nwant %s\ngot  %s", want, got)
		}
		if cut, _ := os.ReadFile(target); string(cut) != string(complete) {
			return fmt.Errorf("the file is not cut back to its complete lines: %q", cut)
		}
		if r, err := st.Commit(ctx, next); err != nil || r.First != 6 {
			return fmt.Errorf("the next commit got %+v, %v; want it at 6", r, err)
		}
		want, err = fileView(ctx, st)
		if err != nil {
			return err
		}
		check(st.Close(ctx))
		if st, err = openJSONL(ctx, dir); err != nil {
			return fmt.Errorf("open after appending past the cut: %w", err)
		}
		defer st.Close(ctx)
		if got, err = fileView(ctx, st); err != nil || got != want {
			return fmt.Errorf("after appending past the cut, reopened:\nwant %s\ngot  %s (%v)", want, got, err)
		}
		return nil
	})
}

func appendFile(path, data string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(data)
	return errors.Join(err, f.Close())
}

// malformedLine is the row "Malformed complete line" (JSONL only). Over a
// session whose main file and live task 2's scratch file have two lines
// each, a complete (newline-terminated) line that is not a batch is put in
// forward, the main file; reverse, the scratch file — once as line 2 of 3
// (valid data follows it) and once as the final line. Open fails with a
// *jsonl.FileError naming that file and line, and leaves every file
// byte-identical: no silent truncation, whether or not it is the last line.
func malformedLine(o order) cell {
	point := map[order]string{forward: "malformed-main-line", reverse: "malformed-scratch-line"}[o]
	return fileCell(point, func(ctx context.Context, dir string) error {
		st, err := openJSONL(ctx, dir)
		if err != nil {
			return err
		}
		if err := fileSession(ctx, st, 1, 2); err != nil {
			return err
		}
		check(st.Close(ctx))
		target, other := jsonlPath(dir), scratchPath(dir, 2)
		if o == reverse {
			target, other = other, target
		}
		data, err := os.ReadFile(target)
		if err != nil {
			return err
		}
		otherData, err := os.ReadFile(other)
		if err != nil {
			return err
		}
		lines := strings.SplitAfter(string(data), "\n") // two lines and ""
		const bad = "{oops}\n"
		for where, corrupt := range map[int]string{
			2: lines[0] + bad + lines[1],
			3: lines[0] + lines[1] + bad,
		} {
			if err := os.WriteFile(target, []byte(corrupt), 0o600); err != nil {
				return err
			}
			st, err := openJSONL(ctx, dir)
			var fe *jsonl.FileError
			if !errors.As(err, &fe) || fe.Path != target || fe.Line != where {
				if err == nil {
					st.Close(ctx)
				}
				return fmt.Errorf("open over a malformed line %d = %v; want a *jsonl.FileError naming %s line %d", where, err, filepath.Base(target), where)
			}
			if now, _ := os.ReadFile(target); string(now) != corrupt {
				return fmt.Errorf("the failed open rewrote the file with the malformed line %d", where)
			}
			if now, _ := os.ReadFile(other); string(now) != string(otherData) {
				return fmt.Errorf("the failed open rewrote the other file")
			}
		}
		return nil
	})
}

// retirementUnlinkFails is the row "Retirement committed, unlink fails"
// (JSONL only: only it keeps scratch in files of their own). Over a session
// (lastSeq 6) whose live task 2 has three scratch frames, the settlement
// of task 2 commits (sequence 7) and its scratch file stays on disk:
// forward, the retirement succeeds (the file is unlinked, or emptied and
// kept for the next task's scratch) and the file is written back with its
// old lines before reopening (a failed retirement, simulated); reverse, the
// retirement really fails (the scratch path is a non-empty directory by
// then, which even root cannot unlink), the store reports the failure, and
// its reads right after the settle show no scratch. Either way the
// reopened store shows no scratch of task 2, lastSeq 7, and its next write
// gets 8.
func retirementUnlinkFails(o order) cell {
	point := map[order]string{forward: "file-recreated-after-unlink", reverse: "unlink-fails"}[o]
	return fileCell(point, func(ctx context.Context, dir string) error {
		st, err := openJSONL(ctx, dir)
		if err != nil {
			return err
		}
		if err := fileSession(ctx, st, 1, 3); err != nil {
			return err
		}
		scratch := scratchPath(dir, 2)
		saved, err := os.ReadFile(scratch)
		if err != nil {
			return err
		}
		if o == reverse {
			check(os.Remove(scratch))
			check(os.Mkdir(scratch, 0o700))
			check(os.WriteFile(filepath.Join(scratch, "lines"), saved, 0o600))
		}
		r, err := st.Commit(ctx, mainBatch(settleWrite(2)))
		if err != nil || r != (storage.Range{First: 7, Last: 7}) {
			return fmt.Errorf("settle got %+v, %v; want 7", r, err)
		}
		failures := st.UnlinkFailures()
		if o == forward {
			if info, err := os.Stat(scratch); (err == nil && info.Size() != 0) || (err != nil && !errors.Is(err, os.ErrNotExist)) || len(failures) != 0 {
				return fmt.Errorf("the settle left its scratch lines (%v) or reported unlink failures %v", err, failures)
			}
			check(os.WriteFile(scratch, saved, 0o600)) // as if the retirement had failed
		} else if !slices.Equal(failures, []storage.ID{2}) {
			return fmt.Errorf("unlink failures %v; want [2]", failures)
		}
		if n, err := frameCount(ctx, st, 2); err != nil || n != 0 {
			return fmt.Errorf("right after the settle the retired scratch shows %d frames (%v)", n, err)
		}
		check(st.Close(ctx))
		if st, err = openJSONL(ctx, dir); err != nil {
			return fmt.Errorf("reopen over the retired scratch: %w", err)
		}
		defer st.Close(ctx)
		if n, err := frameCount(ctx, st, 2); err != nil || n != 0 {
			return fmt.Errorf("reopened, the retired scratch shows %d frames (%v)", n, err)
		}
		if got := st.LastSeq(); got != 7 {
			return fmt.Errorf("reopened lastSeq = %d; want 7, the settlement's", got)
		}
		if r, err := st.Commit(ctx, mainBatch(moveWrite(8))); err != nil || r.First != 8 {
			return fmt.Errorf("next write got %+v, %v; want 8", r, err)
		}
		return nil
	})
}

// crashWithLiveScratch is the row "Main 100, live scratch through 150,
// crash", on JSONL and SQLite: the main history ends at 100 (conversation,
// live task 2, 98 list appends), task 2's scratch runs 101–150 (one batch
// each), then the process dies without settling or closing. forward: it
// dies between commits. reverse: it dies in the middle of writing batch
// 151 of that scratch — JSONL: a torn line ends the scratch file; SQLite: a
// transaction has written 151 but never commits. Reopening recovers
// lastSeq 150 with all 98 moves and 50 frames, and the next write (task 2's
// settlement) gets 151 and survives another reopen.
func crashWithLiveScratch(o order) cell {
	point := map[order]string{forward: "crash-between-commits", reverse: "crash-mid-commit"}[o]
	return fileCell(point, func(ctx context.Context, dir string) error {
		for _, b := range backends[1:] {
			if err := crashOn(ctx, b, filepath.Join(dir, b.name), o); err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
		}
		return nil
	})
}

func crashOn(ctx context.Context, b backend, dir string, o order) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	crashed, err := b.open(ctx, dir)
	if err != nil {
		return err
	}
	if err := fileSession(ctx, crashed, 98, 50); err != nil {
		return err
	}
	if crashed.LastSeq() != 150 {
		return fmt.Errorf("setup reached lastSeq %d; want 150", crashed.LastSeq())
	}
	if o == reverse {
		if err := tearCommit(ctx, b, dir); err != nil {
			return fmt.Errorf("tearing batch 151: %w", err)
		}
	}
	// The process dies: its descriptors and its session lock go with it.
	// Closing writes nothing a crash would not have left, and releases the
	// lock as the kernel would.
	check(crashed.Close(ctx))
	st, err := b.open(ctx, dir)
	if err != nil {
		return fmt.Errorf("reopen after the crash: %w", err)
	}
	defer func() { st.Close(ctx) }()
	all := storage.ListQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}}
	moves, err1 := st.ReadList(ctx, fileMoves, all)
	frames, err2 := st.ReadList(ctx, fileFrames(2), all)
	tasks, err3 := st.GetTasks(ctx, []storage.ID{2})
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	if st.LastSeq() != 150 || len(moves.Items) != 98 || len(frames.Items) != 50 || tasks[2] == nil || !tasks[2].Live() {
		return fmt.Errorf("reopened: lastSeq %d, %d moves, %d frames, task 2 %+v; want 150, 98, 50 and task 2 live",
			st.LastSeq(), len(moves.Items), len(frames.Items), tasks[2])
	}
	if r, err := st.Commit(ctx, mainBatch(settleWrite(2))); err != nil || r.First != 151 {
		return fmt.Errorf("the next write got %+v, %v; want 151", r, err)
	}
	check(st.Close(ctx))
	if st, err = b.open(ctx, dir); err != nil {
		return fmt.Errorf("second reopen: %w", err)
	}
	if st.LastSeq() != 151 {
		return fmt.Errorf("second reopen: lastSeq %d; want 151", st.LastSeq())
	}
	return nil
}

// tearCommit leaves batch 151 of task 2's scratch half-written, as a
// process dying inside that commit would.
func tearCommit(ctx context.Context, b backend, dir string) error {
	if b.name == "jsonl" {
		return appendFile(scratchPath(dir, 2), `{"first":151,"task":2,"writes":[{"type":"listAppend","addr":{`)
	}
	db, err := sql.Open("sqlite3", "file:"+sqlitePath(dir)+"?_busy_timeout=10000")
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // the crash: never committed
	if _, err := tx.ExecContext(ctx, `UPDATE session_metadata SET value='151' WHERE session='s' AND key='last_seq'`); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO list_elements(session,state_key,id,value) SELECT session,state_key,151,'151' FROM values_index WHERE session='s' AND scratch_task=2`)
	return err
}

// retiredScratchOnDisk is the row "Retired scratch still on disk" (JSONL
// only). Task 2 (scratch 4–6) settles at 7 and its scratch file stays
// behind; live task 3 then writes scratch at 8. forward: the retired file
// is intact, well-formed lines the settlement made obsolete. reverse: it
// is malformed — a garbage complete line, a well-formed line claiming
// sequence 50, and a torn tail. Either way reopening ignores it: no frames
// of task 2, task 3's frame kept, lastSeq 8 (the retired lines neither
// fail open nor move lastSeq), the next main write gets 9, and a second
// reopen agrees.
func retiredScratchOnDisk(o order) cell {
	point := map[order]string{forward: "retired-file-intact", reverse: "retired-file-malformed"}[o]
	return fileCell(point, func(ctx context.Context, dir string) error {
		st, err := openJSONL(ctx, dir)
		if err != nil {
			return err
		}
		if _, err := commitAll(ctx, st,
			mainBatch(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}, liveTask(2), liveTask(3)),
			scratchBatch(2, frameWrite(2, 4)), scratchBatch(2, frameWrite(2, 5)), scratchBatch(2, frameWrite(2, 6)),
		); err != nil {
			return err
		}
		scratch := scratchPath(dir, 2)
		saved, err := os.ReadFile(scratch)
		if err != nil {
			return err
		}
		if _, err := commitAll(ctx, st, mainBatch(settleWrite(2)), scratchBatch(3, frameWrite(3, 8))); err != nil {
			return err
		}
		want, err := fileView(ctx, st, 2, 3)
		if err != nil {
			return err
		}
		check(st.Close(ctx))
		left := string(saved)
		if o == reverse {
			bogus := rawJSON(map[string]any{"first": 50, "task": 2, "writes": []storage.Write{frameWrite(2, 50)}})
			left = string(saved[:len(saved)/2]) + "\n{not json}\n" + string(bogus) + "\n" + `{"first":51,"ta`
		}
		check(os.WriteFile(scratch, []byte(left), 0o600))
		for range 2 {
			if st, err = openJSONL(ctx, dir); err != nil {
				return fmt.Errorf("open over the retired scratch: %w", err)
			}
			got, err := fileView(ctx, st, 2, 3)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("reopened over the retired scratch:\nwant %s\ngot  %s", want, got)
			}
			check(st.Close(ctx))
		}
		if st, err = openJSONL(ctx, dir); err != nil {
			return err
		}
		defer st.Close(ctx)
		if r, err := st.Commit(ctx, mainBatch(moveWrite(9))); err != nil || r.First != 9 {
			return fmt.Errorf("the next write got %+v, %v; want 9", r, err)
		}
		return nil
	})
}
