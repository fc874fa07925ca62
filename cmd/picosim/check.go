package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/sqlite"
)

// checkMain is `picosim check SESSION`: it validates a JSONL session or a
// SQLite database without writing to it. The backend is told by the file's
// content, not its name. The files are copied to a temporary directory
// (scratch before main for JSONL, so a task that settles meanwhile is only
// retired; SQLite under a read transaction, so a checkpoint cannot tear the
// copy) and opened there: the backend's own replay checks every batch
// (sequence ranges across files, references, roles, scratch ownership), a
// JSONL history batch by batch against the harness's rules too (heads,
// edits, dependencies, input-result transitions: agent.ValidateBatch), a
// SQLite copy gets SQLite's integrity check, and then the harness-level
// invariants are checked on the opened state. A torn final line is a
// warning with its offset; an absent SQLite session is an error listing the
// sessions the file holds.
func checkMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	path, session, err := parseCheck(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, checkHelp)
		return 0
	}
	if err != nil {
		return fail(stderr, "check", err)
	}
	backend, err := detectBackend(path)
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		return fail(stderr, "check", err)
	case err != nil:
		fmt.Fprintf(stdout, "✗ %s: %v\n", path, err)
		return exitFailed
	}
	if err := backendAvailable(backend); err != nil {
		return fail(stderr, "check", err)
	}
	tmp, err := tempDir(ctx, "picosim-check-")
	if err != nil {
		return fail(stderr, "check", err)
	}
	defer os.RemoveAll(tmp)
	if err := interruption(ctx); err != nil {
		return fail(stderr, "check", err)
	}
	return checkCopy(ctx, backend, path, tmp, session, stdout, stderr)
}

// parseCheck reads picosim check's arguments, the flag before or after the
// session, which must exist.
func parseCheck(args []string) (path, session string, err error) {
	fl := flag.NewFlagSet("check", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	fl.StringVar(&session, "session", runSession, "the session name inside a SQLite database")
	pos, err := parseAnywhere(fl, args)
	switch {
	case err != nil:
		return "", "", err
	case len(pos) == 0:
		return "", "", usagef("missing SESSION; usage: picosim check SESSION [--session NAME]")
	case len(pos) > 1:
		return "", "", usagef("unexpected argument %q", pos[1])
	}
	info, err := os.Stat(pos[0])
	switch {
	case err != nil:
		return "", "", &usageError{err.Error()}
	case info.IsDir():
		return "", "", usagef("%s is a directory; pass the session file in it (session.jsonl, or sessions.db for SQLite)", pos[0])
	}
	return pos[0], session, nil
}

// checkCopy checks the session at path on a copy in tmp and prints what it
// found. The machine failing the copy is an environment error, not a
// problem of the session.
func checkCopy(ctx context.Context, backend, path, tmp, session string, stdout, stderr io.Writer) int {
	// Name the original file, not the copy.
	original := func(msg string) string {
		return strings.ReplaceAll(msg, tmp+string(filepath.Separator), filepath.Dir(path)+string(filepath.Separator))
	}
	var prog checkProgress
	stop := startProgress(stderr, "check", prog.status)
	defer stop()
	store, warnings, problems, err := openCopy(ctx, backend, path, tmp, session, &prog)
	if err != nil {
		stop() // the line is cleared before the error is printed
	}
	var ee *envError
	switch {
	case errors.As(err, &ee):
		return fail(stderr, "check", errors.New(original(err.Error())))
	case err != nil && interruption(ctx) != nil:
		return fail(stderr, "check", interruption(ctx))
	case err != nil:
		fmt.Fprintf(stdout, "✗ %s: %s\n", path, original(err.Error()))
		return exitFailed
	}
	defer store.Close(ctx)
	for _, w := range warnings {
		fmt.Fprintf(stdout, "! %s: warning: %s\n", path, original(w))
	}
	report, more := checkState(ctx, store, &prog)
	stop()
	problems = append(problems, more...)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stdout, "✗ %s: %s\n", path, original(p))
		}
		return exitFailed
	}
	fmt.Fprintf(stdout, "✓ %s: %s; every invariant holds\n", path, report)
	return 0
}

const checkHelp = `usage: picosim check SESSION [--session NAME]

Validates a JSONL session (SESSION and its .scratch directory) or a SQLite database (the session
NAME inside it; the backend is told by the file's content) without writing to it, and prints every
problem with its file and line, or a summary. Every batch of a JSONL history is held to the storage
rules (sequence ranges, also across files, references, roles, scratch ownership) and the harness
rules (heads, edits, dependencies, input-result transitions) against the session before it; a
SQLite file gets SQLite's integrity check; the final state of either backend is held to the harness
invariants (task roles, contexts that derive, queued input in the inbox, running input owned by a
live turn, every call of a settled exchange answered, no live tool after its post_tools, the last
sequence at or above every stored id). A torn final line is a warning with its offset. A session
that is being written is checked on a consistent copy, in TMPDIR. While it works, stderr shows its
progress (the phase, batches replayed, conversations checked): a line redrawn every second on a
terminal, a plain line every 10 s elsewhere. Exit status 1 when something is wrong, 3 when the copy
cannot be made (TMPDIR missing, read-only or full).
`

// sqliteMagic is how every SQLite database file begins.
const sqliteMagic = "SQLite format 3\x00"

// detectBackend tells a JSONL session from a SQLite database by content.
// A file that cannot be opened is the caller's path's fault (a usage
// error); one that cannot be read, the machine's.
func detectBackend(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", &usageError{err.Error()}
	}
	defer f.Close()
	head := make([]byte, 256)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", &envError{fmt.Errorf("reading %s: %w", path, err)}
	}
	head = head[:n]
	switch {
	case strings.HasPrefix(string(head), sqliteMagic):
		return "sqlite", nil
	case strings.HasPrefix(string(head), `{"pico":"session"`):
		return "jsonl", nil
	case n == 0:
		return "", errors.New("an empty file is not a pico session")
	}
	return "", errors.New("not a pico session: neither a JSONL session (no pico header line) nor a SQLite database")
}

// checkQuickBytesMin is the database size from which SQLite's quick_check,
// which skips verifying index contents against their tables, replaces the
// full integrity_check.
const checkQuickBytesMin = 1 << 30

// openCopy copies a session's files into dir and opens the copy read-only
// as far as the backend allows; warnings and problems are what it found on
// the way that does not stop the check.
func openCopy(ctx context.Context, backend, path, dir, session string, prog *checkProgress) (store storage.Storage, warnings, problems []string, err error) {
	base := filepath.Base(path)
	prog.phase("copying")
	if backend == "jsonl" {
		// Scratch first: a task that settles while we copy has its file
		// unlinked (we skip it) and its settlement in the main file we copy
		// after, so the copy holds no scratch the main file does not own.
		scratch := strings.TrimSuffix(path, ".jsonl") + ".scratch"
		if st, err := os.Stat(scratch); err == nil && st.IsDir() {
			if err := copyDir(scratch, filepath.Join(dir, strings.TrimSuffix(base, ".jsonl")+".scratch")); err != nil {
				return nil, nil, nil, err
			}
		}
		copied := filepath.Join(dir, base) // its scratch is beside it, as beside the original
		if err := copyFile(path, copied); err != nil {
			return nil, nil, nil, err
		}
		prog.phase("replaying")
		s, err := jsonl.Open(ctx, copied, jsonl.Options{Verify: func(ctx context.Context, before storage.Storage, b storage.CommitBatch) error {
			prog.batch()
			return agent.ValidateBatch(ctx, before, b)
		}})
		if err != nil {
			return nil, nil, nil, copyFailed(err)
		}
		for _, t := range s.TornTails() {
			warnings = append(warnings, fmt.Sprintf("%s: a torn final line of %d bytes at offset %d was discarded (a crash while it was written)", t.Path, t.Bytes, t.Offset))
		}
		return s, warnings, nil, nil
	}
	copied := filepath.Join(dir, base)
	if err := copySQLite(ctx, path, copied); err != nil {
		return nil, nil, nil, err
	}
	prog.phase("integrity check")
	problems, err = integrityProblems(ctx, copied)
	if err != nil {
		return nil, nil, nil, copyFailed(err)
	}
	s, err := sqlite.Open(ctx, copied, sqlite.Options{Session: session, ReadOnly: true})
	var nf *sqlite.SessionNotFoundError
	if errors.As(err, &nf) {
		names, lerr := sqlite.Sessions(ctx, copied)
		if lerr != nil {
			return nil, nil, nil, lerr
		}
		return nil, nil, nil, fmt.Errorf("%w; the sessions it holds: %s (pass one with --session)", err, strings.Join(quoted(names), ", "))
	}
	if err != nil {
		return nil, nil, nil, copyFailed(err)
	}
	return s, nil, problems, nil
}

// copyFailed is an error opening the copy, which is the machine's when the
// copy's directory failed it (a full TMPDIR, say), and else the session's.
func copyFailed(err error) error {
	if isEnvironment(err) {
		return &envError{err}
	}
	return err
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// copySQLite copies a database and its WAL while a read transaction on the
// original holds a snapshot, so that a checkpoint of a live writer cannot
// reset the WAL under the copy. The reader writes nothing to the database
// (SQLite may touch its shared-memory index, which holds no data).
func copySQLite(ctx context.Context, path, to string) error {
	db, err := sql.Open("sqlite3", "file:"+url.PathEscape(path)+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN"); err == nil {
		var n int
		if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err == nil {
			defer conn.ExecContext(ctx, "COMMIT")
		}
	}
	for _, suffix := range []string{"", "-wal"} {
		if err := copyFile(path+suffix, to+suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// integrityProblems runs SQLite's own check of the copy's pages and
// indexes: what a hand-overwritten page breaks without any row failing to
// decode.
func integrityProblems(ctx context.Context, path string) ([]string, error) {
	pragma := "integrity_check"
	if st, err := os.Stat(path); err == nil && st.Size() >= checkQuickBytesMin {
		pragma = "quick_check"
	}
	db, err := sql.Open("sqlite3", "file:"+url.PathEscape(path)+"?_busy_timeout=10000")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "PRAGMA "+pragma)
	if err != nil {
		return []string{fmt.Sprintf("SQLite's %s cannot run: %v", pragma, err)}, nil
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, err
		}
		if line != "ok" {
			problems = append(problems, fmt.Sprintf("SQLite's %s: %s", pragma, line))
		}
	}
	return problems, rows.Err()
}

// copyFile copies a file into the check's temporary directory: failing to
// read the original is the session's problem, failing to write the copy
// the machine's.
func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.WriteFile(to, data, fileMode); err != nil {
		return &envError{fmt.Errorf("copying the session to the temporary directory: %w", err)}
	}
	return nil
}

// copyDir copies the files of a directory; one that vanishes while it is
// copied (a scratch file unlinked by a settling task) is skipped.
func copyDir(from, to string) error {
	if err := os.MkdirAll(to, dirMode); err != nil {
		return &envError{err}
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if err := copyFile(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// checkState checks what the backend's replay cannot: live tasks of the
// built-in kinds carry the role their status maps to, every conversation's
// context derives by the rule (§2.2) and projects, queued input is in the inbox, running input
// belongs to a live generation, post_tools or overflow collapse, no live
// task waits on an overflow collapse, every call of a settled exchange has
// its result and no tool of it is still live, and the last sequence is at
// or above every stored id.
func checkState(ctx context.Context, store storage.Storage, prog *checkProgress) (string, []string) {
	prog.phase("reading the final state")
	var problems []string
	convs, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
		return store.ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
	})
	if err != nil {
		return "", []string{err.Error()}
	}
	all, err := storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Task], error) {
		return store.ScanTasks(ctx, storage.TaskQuery{Cursor: c})
	})
	if err != nil {
		return "", []string{err.Error()}
	}
	var tasks []*storage.Task // the live ones
	for _, t := range all {
		if t.Live() {
			tasks = append(tasks, t)
		}
	}
	more, err := exchangeProblems(ctx, store, convs, all)
	if err != nil {
		return "", []string{err.Error()}
	}
	problems = append(problems, more...)
	problems = append(problems, collapseWaitProblems(tasks)...)
	usage, err := usageProblems(ctx, store)
	if err != nil {
		return "", []string{err.Error()}
	}
	problems = append(problems, usage...)
	maxID := storage.ID(0)
	for _, c := range convs {
		maxID = max(maxID, c.ID)
	}
	for _, t := range all {
		maxID = max(maxID, t.ID)
	}
	kinds := map[string]core.TaskKind{agent.GenerationKindName: agent.GenerationKind, agent.ToolKindName: agent.ToolKind,
		agent.PostToolsKindName: agent.PostToolsKind, agent.CollapseKindName: agent.CollapseKind}
	owned := map[storage.ID]bool{} // inputs of live groups
	for _, t := range tasks {
		if k, ok := kinds[t.Kind]; ok {
			if role, known := k.Role(t.Status); !known || role != t.Role {
				problems = append(problems, fmt.Sprintf("task %d (%s) is %s with role %s; the kind maps that status to %q", t.ID, t.Kind, t.Status, t.Role, role))
			}
		}
		for _, in := range agent.InputGroup(t) {
			owned[in] = true
		}
	}
	rule, err := readTranscripts(ctx, store, convs)
	if err != nil {
		return "", []string{err.Error()}
	}
	prog.phase("checking conversations")
	prog.conversations(len(convs))
	for _, c := range convs {
		prog.conversation()
		if p := contextRuleProblem(ctx, store, rule, c.ID, store.LastSeq()); p != "" {
			problems = append(problems, p)
		}
		entries, err := store.ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Before: math.MaxInt64, Limit: 1}, ConversationID: c.ID})
		if err == nil && len(entries.Items) > 0 {
			maxID = max(maxID, entries.Items[len(entries.Items)-1].ID)
		}
		cx, err := core.DeriveContext(ctx, store, c.ID, 0)
		if err == nil {
			_, err = cx.Request()
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("conversation %d: its context does not derive: %v", c.ID, err))
		}
		inbox, err := storage.AllPages(func(cur storage.Cursor) (storage.Page[storage.Element], error) {
			return store.ReadList(ctx, agent.InboxList.In(c.ID).Address, storage.ListQuery{Cursor: cur})
		})
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		queued := map[storage.ID]bool{}
		for _, el := range inbox {
			queued[el.ID] = true
		}
		results, err := inputResults(ctx, store, c.ID)
		if err != nil {
			problems = append(problems, fmt.Sprintf("conversation %d: %v", c.ID, err))
			continue
		}
		for id, r := range results {
			switch {
			case r.Status == agent.InputQueued && !queued[id]:
				problems = append(problems, fmt.Sprintf("conversation %d: input %d is queued but not in the inbox", c.ID, id))
			case r.Status == agent.InputRunning && !owned[id]:
				problems = append(problems, fmt.Sprintf("conversation %d: input %d is running but no live generation, post_tools or overflow collapse owns it", c.ID, id))
			}
			delete(queued, id)
		}
		for id := range queued {
			problems = append(problems, fmt.Sprintf("conversation %d: inbox element %d has no input result", c.ID, id))
		}
	}
	if maxID > store.LastSeq() {
		problems = append(problems, fmt.Sprintf("the last sequence is %d but id %d is stored: the next commit would reuse ids", store.LastSeq(), maxID))
	}
	slices.Sort(problems)
	return fmt.Sprintf("%d conversations, %d live tasks, last sequence %d", len(convs), len(tasks), store.LastSeq()), problems
}

// exchangeProblems holds every settled exchange to what post_tools relies
// on: it starts only once every tool of the exchange is terminal, and each
// tool settles with its result entry, so a settled post_tools leaves no
// live tool behind and no call of its assistant without a result. The
// exchanges of a deleted conversation (not among convs) are gone with its
// transcript.
func exchangeProblems(ctx context.Context, store storage.Storage, convs []storage.Conversation, all []*storage.Task) ([]string, error) {
	byID := make(map[storage.ID]*storage.Task, len(all))
	for _, t := range all {
		byID[t.ID] = t
	}
	exists := make(map[storage.ID]bool, len(convs))
	for _, c := range convs {
		exists[c.ID] = true
	}
	var problems []string
	for _, t := range all {
		if t.Kind != agent.PostToolsKindName || t.Live() || !exists[t.ConversationID] {
			continue
		}
		var st agent.PostToolsState
		if err := json.Unmarshal(t.State, &st); err != nil {
			problems = append(problems, fmt.Sprintf("post_tools %d: its state does not decode: %v", t.ID, err))
			continue
		}
		for _, id := range st.Tools {
			if tool, ok := byID[id]; !ok || tool.Live() {
				problems = append(problems, fmt.Sprintf("tool task %d is missing or still live after its post_tools %d settled", id, t.ID))
			}
		}
		got, err := store.GetEntries(ctx, []storage.ID{st.Assistant})
		if err != nil {
			return nil, err
		}
		a := got[st.Assistant]
		if a == nil || len(a.Model) == 0 {
			problems = append(problems, fmt.Sprintf("post_tools %d: its assistant entry %d is missing", t.ID, st.Assistant))
			continue
		}
		for _, call := range a.Model[0].ToolCalls() {
			p, err := store.ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 1}, ConversationID: a.ConversationID, Kind: "tool_result", Key: call.ID})
			if err != nil {
				return nil, err
			}
			if len(p.Items) == 0 {
				problems = append(problems, fmt.Sprintf("conversation %d: call %s of entry %d has no result though its exchange settled (post_tools %d)", a.ConversationID, call.ID, a.ID, t.ID))
			}
		}
	}
	return problems, nil
}

// usageProblems holds the session's usage totals to its usage rows: the
// totals are the sum of every known usage the rows record, added in their
// order (§8.2: every attempt's usage counts, failed and deferred ones
// too), so that stats read from the totals are what the rows say.
func usageProblems(ctx context.Context, store storage.Storage) ([]string, error) {
	rows, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Element], error) {
		return store.ReadList(ctx, agent.UsageList.Address, storage.ListQuery{Cursor: c})
	})
	if err != nil {
		return nil, err
	}
	var sum ai.Usage
	for _, el := range rows {
		var row agent.UsageRow
		if err := json.Unmarshal(el.Value, &row); err != nil {
			return []string{fmt.Sprintf("usage row %d does not decode: %v", el.ID, err)}, nil
		}
		if row.Usage != nil {
			sum = sum.Add(*row.Usage)
		}
	}
	var totals ai.Usage
	v, ok, err := store.GetValue(ctx, agent.UsageTotals.Address, 0)
	switch {
	case err != nil:
		return nil, err
	case ok:
		if err := json.Unmarshal(v.Value, &totals); err != nil {
			return []string{fmt.Sprintf("the usage totals do not decode: %v", err)}, nil
		}
	}
	if totals != sum {
		return []string{fmt.Sprintf("the usage totals are %+v; the %d usage rows add up to %+v", totals, len(rows), sum)}, nil
	}
	return nil, nil
}

// inputResults reads every input result of a conversation, by input id.
func inputResults(ctx context.Context, store storage.Storage, conv storage.ID) (map[storage.ID]agent.InputResult, error) {
	out := map[storage.ID]agent.InputResult{}
	err := agent.EachInputResult(ctx, store, conv, func(id storage.ID, r agent.InputResult, _ json.RawMessage) { out[id] = r })
	return out, err
}

// collapseWaitProblems names live tasks that wait on a live overflow
// collapse: the overflow chain hands its turn on at the collapse's
// settlement, so nothing live ever waits on one (§8.2).
func collapseWaitProblems(live []*storage.Task) []string {
	var problems []string
	for _, w := range agent.CollapseWaits(live) {
		if w.Reason == agent.CollapseOverflow {
			problems = append(problems, w.String()+", which hands the turn on only when it settles")
		}
	}
	return problems
}

// checkProgress is what check has done so far, for its progress line. The
// counting methods do nothing on a nil one (a run's own final check passes
// nil); status is only asked of the one check made.
type checkProgress struct {
	step         atomic.Pointer[string]
	batches      atomic.Int64
	convs, total atomic.Int64
}

func (p *checkProgress) phase(name string) {
	if p != nil {
		p.step.Store(&name)
	}
}

func (p *checkProgress) batch() {
	if p != nil {
		p.batches.Add(1)
	}
}

func (p *checkProgress) conversations(n int) {
	if p != nil {
		p.total.Store(int64(n))
	}
}

func (p *checkProgress) conversation() {
	if p != nil {
		p.convs.Add(1)
	}
}

func (p *checkProgress) status() string {
	s := "starting"
	if step := p.step.Load(); step != nil {
		s = *step
	}
	if n := p.batches.Load(); n > 0 {
		s += fmt.Sprintf(", %d batches replayed", n)
	}
	if total := p.total.Load(); total > 0 {
		s += fmt.Sprintf(", conversation %d of %d", p.convs.Load(), total)
	}
	return s
}
