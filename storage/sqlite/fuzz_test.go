package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3" // the raw second connection that corrupts a row

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/sqlite"
)

// The fuzz session: one valid history whose rows carry every decoded column.
var (
	fuzzValue   = storage.ConversationValue[int]("v", storage.Rewind).In(1).Address
	fuzzList    = storage.ConversationList[string]("l", storage.Rewind).In(1).Address
	fuzzScratch = storage.ScratchValue[int]("s").In(2).Address
)

// fuzzSession commits the fuzz session: conversation 1, task 2 (with state
// and scratch), task 3 (after 2, owning conversation 4), entry 5 (data,
// model, head), entry 6 (edits), a rewindable value (seq 7), a rewindable
// list element (id 8) and a scratch value (seq 9).
func fuzzSession(ctx context.Context, s storage.Storage) error {
	batch := storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		{Type: storage.WriteTask, Task: &storage.Task{ID: 2, ConversationID: 1, Kind: "k", Status: "s", Role: storage.RoleStart, State: json.RawMessage(`{"n":1}`)}},
		{Type: storage.WriteTask, Task: &storage.Task{ID: 3, ConversationID: 1, Kind: "k", Status: "s", Role: storage.RoleStart, After: []ID{2}, Owns: []ID{4}}},
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 4, Owner: 3}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 5, ConversationID: 1, Kind: "user", Data: json.RawMessage(`{"text":"hi"}`),
			Model: []ai.Message{ai.UserText("hi", 0)}, Head: 5}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 6, ConversationID: 1, Kind: "note", Edits: []storage.ContextEdit{{Target: 5, Action: storage.EditOmit}}}},
		{Type: storage.WriteValueSet, Addr: &fuzzValue, Value: json.RawMessage(`1`)},
		{Type: storage.WriteListAppend, Addr: &fuzzList, Value: json.RawMessage(`"x"`)},
	}}
	if _, err := s.Commit(ctx, batch); err != nil {
		return err
	}
	_, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchScratch, Task: 2, Writes: []storage.Write{
		{Type: storage.WriteValueSet, Addr: &fuzzScratch, Value: json.RawMessage(`{"step":1}`)},
	}})
	return err
}

// rowColumn is one decoded column of one row of the fuzz session.
type rowColumn struct {
	table, column string
	where         string // the row, as an SQL predicate on the table
	whereArgs     []any
	row           ID // what the row is known by: entry, task, sequence or element id
	// decode says what a stored value must read back as (typ is SQLite's
	// typeof after the column's affinity applied), or false when a correct
	// backend never writes it: a malformed row.
	decode func(typ string, b []byte) (want any, ok bool)
	// read reads the column back through storage.Storage.
	read func(ctx context.Context, s storage.Storage) (any, error)
	// seeds are well-formed and nearly well-formed values of the column,
	// added to the corpus besides fuzzSeeds.
	seeds []string
}

// rawJSON is a column read back verbatim as json.RawMessage; emptyOK when the
// backend stores an empty payload as an empty string.
func rawJSON(emptyOK bool) func(string, []byte) (any, bool) {
	return func(_ string, b []byte) (any, bool) {
		return string(b), (emptyOK && len(b) == 0) || json.Valid(b)
	}
}

// typedJSON is a column the backend decodes into T.
func typedJSON[T any]() func(string, []byte) (any, bool) {
	return func(_ string, b []byte) (any, bool) {
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, false
		}
		return v, true
	}
}

// integer is a column the backend writes as an INTEGER.
func integer(typ string, b []byte) (any, bool) {
	if typ != "integer" {
		return nil, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		panic(fmt.Sprintf("invariant: SQLite integer %q does not parse: %v", b, err))
	}
	return ID(n), true
}

func entryField(id ID, field func(*storage.Entry) any) func(context.Context, storage.Storage) (any, error) {
	return func(ctx context.Context, s storage.Storage) (any, error) {
		got, err := s.GetEntries(ctx, []ID{id})
		if err != nil {
			return nil, err
		}
		if got[id] == nil {
			return nil, fmt.Errorf("entry %d is missing", id)
		}
		return field(got[id]), nil
	}
}

func taskField(id ID, field func(*storage.Task) any) func(context.Context, storage.Storage) (any, error) {
	return func(ctx context.Context, s storage.Storage) (any, error) {
		got, err := s.GetTasks(ctx, []ID{id})
		if err != nil {
			return nil, err
		}
		if got[id] == nil {
			return nil, fmt.Errorf("task %d is missing", id)
		}
		return field(got[id]), nil
	}
}

func valueAt(a storage.Address) func(context.Context, storage.Storage) (any, error) {
	return func(ctx context.Context, s storage.Storage) (any, error) {
		v, ok, err := s.GetValue(ctx, a, 0)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("value %s is missing", a)
		}
		return string(v.Value), nil
	}
}

func firstElement(ctx context.Context, s storage.Storage) (any, error) {
	p, err := s.ReadList(ctx, fuzzList, storage.ListQuery{Cursor: storage.Cursor{Limit: 10}})
	if err != nil {
		return nil, err
	}
	if len(p.Items) != 1 || p.Items[0].ID != 8 {
		return nil, fmt.Errorf("list = %v; want element 8 only", p.Items)
	}
	return string(p.Items[0].Value), nil
}

// fuzzColumns are the columns FuzzRowDecode corrupts, chosen by the first
// fuzz argument.
var fuzzColumns = []rowColumn{
	{table: "entries", column: "data", where: "id=5", row: 5, decode: rawJSON(true),
		read:  entryField(5, func(e *storage.Entry) any { return string(e.Data) }),
		seeds: []string{`{"text":"hi"}`, `{"text":"\ud83d"}`, `{"a" : [ 1 , 2 ] }`}},
	{table: "entries", column: "model", where: "id=5", row: 5, decode: typedJSON[[]ai.Message](),
		read: entryField(5, func(e *storage.Entry) any { return e.Model }),
		seeds: []string{fuzzModel, `[{"role":"user","timestamp":0}]`, `[{"role":"bogus","content":"x","timestamp":0}]`,
			`[{"role":"toolResult","content":[{"type":"text","text":"x"}],"timestamp":1}]`,
			`[{"role":"toolResult","toolCallId":"c","toolName":"a","content":[{"type":"text","text":"<x>"}],"details":{"a" : 1},"timestamp":1}]`,
			`[{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"a"},{"type":"text"}],"stopReason":"toolUse","timestamp":1}]`,
			`[{"role":"assistant","content":[{"type":"toolCall","name":"a"}],"timestamp":1}]`,
			`[{"role":"system","content":"","sections":{"a":null,"b":"x"},"timestamp":0}]`}},
	{table: "entries", column: "head", where: "id=5", row: 5, decode: integer,
		read:  entryField(5, func(e *storage.Entry) any { return e.Head }),
		seeds: []string{`5`, `9223372036854775807`, `9223372036854775808`, `1.5`, `1e3`, `abc`, ` 12 `}},
	{table: "entries", column: "edits", where: "id=6", row: 6, decode: typedJSON[[]storage.ContextEdit](),
		read: entryField(6, func(e *storage.Entry) any { return e.Edits }),
		seeds: []string{`[{"target":5,"action":"omit"}]`, `[{"target":5,"action":"replace","messages":` + fuzzModel + `}]`,
			`[{"target":5,"action":"explode"}]`, `[{"target":"5"}]`}},
	{table: "tasks", column: "state", where: "id=2", row: 2, decode: rawJSON(true),
		read:  taskField(2, func(t *storage.Task) any { return string(t.State) }),
		seeds: []string{`{"n":1}`, `"x"`}},
	{table: "tasks", column: "after", where: "id=3", row: 3, decode: typedJSON[[]ID](),
		read:  taskField(3, func(t *storage.Task) any { return t.After }),
		seeds: []string{`[2]`, `[1.5]`, `[9223372036854775808]`, `["2"]`}},
	{table: "tasks", column: "owns", where: "id=3", row: 3, decode: typedJSON[[]ID](),
		read:  taskField(3, func(t *storage.Task) any { return t.Owns }),
		seeds: []string{`[4]`, `[4,4]`, `[-4]`}},
	{table: "value_versions", column: "value", where: "state_key=? AND seq=7", whereArgs: []any{fuzzValue.StateKey()}, row: 7,
		decode: rawJSON(false), read: valueAt(fuzzValue), seeds: []string{`1`, `"x"`}},
	{table: "list_elements", column: "value", where: "state_key=? AND id=8", whereArgs: []any{fuzzList.StateKey()}, row: 8,
		decode: rawJSON(false), read: firstElement, seeds: []string{`"x"`, `{"k":[true,false]}`}},
	{table: "value_versions", column: "value", where: "state_key=? AND seq=9", whereArgs: []any{fuzzScratch.StateKey()}, row: 9,
		decode: rawJSON(false), read: valueAt(fuzzScratch), seeds: []string{`{"step":1}`}},
}

const fuzzModel = `[{"role":"user","content":"hi","timestamp":0}]`

// asBlob, set in the column selector, binds the fuzzed bytes as a BLOB
// instead of TEXT.
const asBlob = 0x80

// nestingDepthMax is encoding/json's nesting limit: one level deeper is
// malformed to every reader in this module.
const nestingDepthMax = 10_000

// FuzzRowDecode writes arbitrary bytes into one decoded column of one row of
// a real database (the package's own schema and a valid history, corrupted
// through a second connection), reopens it and reads through
// storage.Storage. Nothing may panic; a well-formed value must read back as
// stored, also after a commit that rewrites its row; a malformed one must
// fail the read with a *sqlite.RowError naming the table and the row.
func FuzzRowDecode(f *testing.F) {
	for col, c := range fuzzColumns {
		for _, v := range append(fuzzSeeds, c.seeds...) {
			f.Add(uint8(col), []byte(v))
		}
		f.Add(uint8(col)|asBlob, []byte("\xff"))
	}
	f.Add(uint8(2)|asBlob, []byte("5")) // an integer's digits as a BLOB in head
	template := fuzzTemplate(f)
	f.Fuzz(func(t *testing.T, selector uint8, data []byte) {
		c := fuzzColumns[int(selector&^asBlob)%len(fuzzColumns)]
		var bound any = string(data)
		if selector&asBlob != 0 {
			bound = append([]byte{}, data...) // never nil: nil binds NULL
		}
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "s.db")
		if err := os.WriteFile(path, template, 0o600); err != nil {
			t.Fatal(err)
		}
		typ, stored := corruptRow(t, ctx, path, c, bound)
		want, wellFormed := c.decode(typ, stored)
		where := fmt.Sprintf("%s.%s of row %d (stored as %s %q)", c.table, c.column, c.row, typ, clip(stored))
		repro := fmt.Sprintf("go test ./storage/sqlite -run '^%s$'  # selector %d, bytes %q",
			strings.ReplaceAll(t.Name(), "/", "$/^"), selector, clip(data))

		s, err := sqlite.Open(ctx, path, sqlite.Options{Session: "s"})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer s.Close(ctx)
		got, readErr := c.read(ctx, s)
		sweepErr := readEverything(ctx, s)
		var commitErr error
		if c.table == "tasks" {
			commitErr = patchTasks(ctx, s)
		}
		if !wellFormed {
			checkMalformed(t, c, where, got, readErr, repro)
			return
		}
		if readErr != nil || sweepErr != nil || commitErr != nil {
			t.Fatalf("%s is well formed, yet read: %v; reads: %v; commit: %v\n%s", where, readErr, sweepErr, commitErr, repro)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s read back as %s; want %s\n%s", where, show(got), show(want), repro)
		}
		if again, err := c.read(ctx, s); err != nil || !reflect.DeepEqual(again, want) {
			t.Fatalf("%s after a commit that rewrote tasks: %s, %v; want %s\n%s", where, show(again), err, show(want), repro)
		}
		checkReencodes(t, got, where)
	})
}

// fuzzSeeds go into every column: edge values of JSON and of its bytes.
var fuzzSeeds = []string{
	`null`, `{}`, `[]`, `""`, `0`, `-1`, `1e999`, `123456789012345678901234567890`,
	strings.Repeat("[", 100) + strings.Repeat("]", 100),
	strings.Repeat("[", nestingDepthMax+1) + strings.Repeat("]", nestingDepthMax+1),
	"\"\xff\xfe\"", "\xff", "", `[{"role":"us`, `{"a":`, ` [ ] `, `[1,2,3]`, `[null]`,
}

// fuzzTemplate is the fuzz session, committed once through sqlite.Open and
// closed (so its WAL is checkpointed into the one file); every input
// corrupts a copy, which keeps the seed corpus within a normal test run.
func fuzzTemplate(f *testing.F) []byte {
	ctx := context.Background()
	path := filepath.Join(f.TempDir(), "template.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{Session: "s"})
	if err != nil {
		f.Fatal(err)
	}
	if err := fuzzSession(ctx, s); err != nil {
		f.Fatalf("fuzz session: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// corruptRow overwrites the column in the database at path through a
// connection of its own and returns SQLite's typeof and bytes of what it
// stored. The connection does not sync: the file is scratch.
func corruptRow(t *testing.T, ctx context.Context, path string, c rowColumn, bound any) (string, []byte) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+url.PathEscape(path)+"?_synchronous=OFF")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	args := append([]any{bound, "s"}, c.whereArgs...)
	res, err := db.ExecContext(ctx, `UPDATE `+c.table+` SET `+c.column+`=? WHERE session=? AND `+c.where, args...)
	if err != nil {
		t.Fatalf("corrupt %s.%s: %v", c.table, c.column, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("corrupt %s.%s: %d rows changed; want 1", c.table, c.column, n)
	}
	var (
		typ    string
		stored []byte
	)
	if err := db.QueryRowContext(ctx, `SELECT typeof(`+c.column+`), CAST(`+c.column+` AS BLOB) FROM `+c.table+` WHERE session=? AND `+c.where,
		append([]any{"s"}, c.whereArgs...)...).Scan(&typ, &stored); err != nil {
		t.Fatalf("read back %s.%s: %v", c.table, c.column, err)
	}
	return typ, stored
}

// readEverything runs every read of storage.Storage that decodes a row of
// the fuzz session and returns the first error.
func readEverything(ctx context.Context, s storage.Storage) error {
	page := storage.Cursor{Limit: 100}
	reads := []func() error{
		func() error { _, err := s.GetEntries(ctx, []ID{5, 6}); return err },
		func() error {
			_, err := s.ScanEntries(ctx, storage.EntryQuery{Cursor: page, ConversationID: 1})
			return err
		},
		func() error { _, _, err := s.NewestHead(ctx, 1, 0); return err },
		func() error { _, err := s.GetTasks(ctx, []ID{2, 3}); return err },
		func() error { _, err := s.ScanTasks(ctx, storage.TaskQuery{Cursor: page}); return err },
		func() error { _, _, err := s.GetValue(ctx, fuzzValue, 0); return err },
		func() error { _, _, err := s.GetValue(ctx, fuzzValue, 6); return err },
		func() error {
			_, err := s.ScanValues(ctx, storage.ValueQuery{Scope: fuzzValue.Scope, Namespace: fuzzValue.Namespace, Limit: 10})
			return err
		},
		func() error { _, err := s.ReadList(ctx, fuzzList, storage.ListQuery{Cursor: page, At: 8}); return err },
		func() error { _, _, err := s.GetValue(ctx, fuzzScratch, 0); return err },
		func() error {
			_, err := s.ScanValues(ctx, storage.ValueQuery{Scope: fuzzScratch.Scope, Namespace: fuzzScratch.Namespace, Limit: 10})
			return err
		},
		func() error { _, err := s.EntryKinds(ctx); return err },
	}
	for _, read := range reads {
		if err := read(); err != nil {
			return err
		}
	}
	return nil
}

// patchTasks commits a patch of both tasks: the backend reads each task row
// and writes it back whole, so a well-formed task column must survive it.
func patchTasks(ctx context.Context, s storage.Storage) error {
	_, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WritePatch, ID: 2, Status: "running", Role: storage.RoleInflight},
		{Type: storage.WritePatch, ID: 3, Status: "running", Role: storage.RoleInflight},
	}})
	return err
}

// checkMalformed holds a read of a malformed row to the contract: a
// *sqlite.RowError that names the table and the row.
func checkMalformed(t *testing.T, c rowColumn, where string, got any, readErr error, repro string) {
	t.Helper()
	switch {
	case readErr == nil:
		gap(t, "%s is malformed, yet it read back without an error as %s\n%s", where, show(got), repro)
	case !isRowError(readErr) || !namesRow(readErr, c.table, c.row):
		gap(t, "%s is malformed; the read failed with %T %s, which does not name table %s and row %d\n%s",
			where, readErr, show(readErr.Error()), c.table, c.row, repro)
	}
}

func gap(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Fatalf(format, args...)
}

func isRowError(err error) bool {
	var re *sqlite.RowError
	return errors.As(err, &re)
}

func namesRow(err error, table string, row ID) bool {
	msg := err.Error()
	return strings.Contains(msg, table) && regexp.MustCompile(`\b`+row.String()+`\b`).MatchString(msg)
}

// checkReencodes writes a decoded column back as a writer would (encode)
// and reads it again (decode, encode): the bytes must be a fixed point, or a
// session would change each time a value passes through it. (Comparing
// values would flag harmless differences: nil against empty slices, and
// raw JSON that encoding compacts.)
func checkReencodes(t *testing.T, got any, where string) {
	t.Helper()
	if _, isRaw := got.(string); isRaw {
		return // read back verbatim, compared byte for byte already
	}
	if _, isID := got.(ID); isID {
		return
	}
	first, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("%s read back as %s, which does not encode: %v", where, show(got), err)
	}
	again := reflect.New(reflect.TypeOf(got))
	if err := json.Unmarshal(first, again.Interface()); err != nil {
		t.Fatalf("%s re-encoded as %q, which does not decode: %v", where, clip(first), err)
	}
	second, err := json.Marshal(again.Elem().Interface())
	if err != nil || string(second) != string(first) {
		t.Fatalf("%s does not survive re-encoding: %q became %q (%v)", where, clip(first), clip(second), err)
	}
}

// clipBytesMax bounds a fuzzed value quoted in a message.
const clipBytesMax = 80

// clip shortens bytes for a message.
func clip(b []byte) []byte {
	if len(b) > clipBytesMax {
		return append(b[:clipBytesMax:clipBytesMax], "..."...)
	}
	return b
}

// show formats a value read back, shortened, for a message.
func show(v any) string {
	return fmt.Sprintf("%q", clip(fmt.Appendf(nil, "%#v", v)))
}
