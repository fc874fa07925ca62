package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"

	"github.com/pico-go/pico/storage"
)

type ID = storage.ID

// StorageVersion is the schema version this package reads and writes.
const StorageVersion = "1"

// Options configures Open.
type Options struct {
	// Session is the id of the session the store reads and writes; required.
	Session string
}

// VersionError reports a session stored with another schema version.
type VersionError struct {
	Found, Wanted string
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("sqlite: storage version %q found, want %q", e.Found, e.Wanted)
}

// RowError reports a stored row that does not decode: the database was
// edited by hand or by another program. Row is the row's id (a sequence
// number), or 0 when the row could not be read far enough to know it.
type RowError struct {
	Table  string
	Row    ID
	Column string
	Err    error
}

func (e *RowError) Error() string {
	return fmt.Sprintf("sqlite: table %s, row %d, column %s: %v", e.Table, e.Row, e.Column, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// errNotJSON is the cause of a RowError for a JSON column holding something
// else.
var errNotJSON = errors.New("not valid JSON")

// checkJSON checks a raw JSON column. optional says the empty string is
// how an absent payload is stored (entry data, task state); a value or a
// list element always has one.
func checkJSON(table string, row ID, column, raw string, optional bool) error {
	if (optional && raw == "") || json.Valid([]byte(raw)) {
		return nil
	}
	return &RowError{Table: table, Row: row, Column: column, Err: errNotJSON}
}

// Store is the SQLite backend for one session.
type Store struct {
	mu      sync.RWMutex
	closed  bool
	lastSeq ID
	db      *sql.DB
	session string
}

var _ storage.Storage = (*Store)(nil)

// queryer is what both *sql.DB and *sql.Tx offer.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

const schema = `
CREATE TABLE IF NOT EXISTS session_metadata(
	session TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
	PRIMARY KEY(session, key));
CREATE TABLE IF NOT EXISTS conversations(
	session TEXT NOT NULL, id INTEGER NOT NULL, parent_conv INTEGER, parent_at INTEGER,
	owner INTEGER NOT NULL DEFAULT 0, deleted INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY(session, id));
CREATE INDEX IF NOT EXISTS conversations_parent ON conversations(session, parent_conv, id);
CREATE INDEX IF NOT EXISTS conversations_owner ON conversations(session, owner, id);
CREATE TABLE IF NOT EXISTS entries(
	session TEXT NOT NULL, id INTEGER NOT NULL, conv INTEGER NOT NULL, kind TEXT NOT NULL,
	key TEXT NOT NULL DEFAULT '', by_task INTEGER NOT NULL DEFAULT 0,
	data TEXT, model TEXT, head INTEGER, edits TEXT,
	PRIMARY KEY(session, id));
CREATE INDEX IF NOT EXISTS entries_conv ON entries(session, conv, id);
CREATE INDEX IF NOT EXISTS entries_kind_key ON entries(session, conv, kind, key, id);
CREATE INDEX IF NOT EXISTS entries_key ON entries(session, conv, key, id);
CREATE INDEX IF NOT EXISTS entries_heads ON entries(session, conv, id) WHERE head IS NOT NULL;
CREATE TABLE IF NOT EXISTS entry_kinds(
	session TEXT NOT NULL, kind TEXT NOT NULL, PRIMARY KEY(session, kind));
CREATE TABLE IF NOT EXISTS tasks(
	session TEXT NOT NULL, id INTEGER NOT NULL, conv INTEGER NOT NULL, kind TEXT NOT NULL,
	status TEXT NOT NULL, role TEXT NOT NULL, state TEXT, after TEXT,
	background INTEGER NOT NULL DEFAULT 0, owns TEXT, abort INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY(session, id));
CREATE INDEX IF NOT EXISTS tasks_role ON tasks(session, role, id);
CREATE INDEX IF NOT EXISTS tasks_conv_role ON tasks(session, conv, role, id);
CREATE INDEX IF NOT EXISTS tasks_conv ON tasks(session, conv, id);
CREATE TABLE IF NOT EXISTS values_index(
	session TEXT NOT NULL, state_key TEXT NOT NULL, scope_ns TEXT NOT NULL, key TEXT NOT NULL,
	rewind INTEGER NOT NULL, is_list INTEGER NOT NULL, scratch_task INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY(session, state_key));
CREATE INDEX IF NOT EXISTS values_index_ns ON values_index(session, scope_ns, key);
CREATE INDEX IF NOT EXISTS values_index_scratch ON values_index(session, scratch_task) WHERE scratch_task != 0;
CREATE TABLE IF NOT EXISTS value_versions(
	session TEXT NOT NULL, state_key TEXT NOT NULL, seq INTEGER NOT NULL, value TEXT,
	deleted INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY(session, state_key, seq));
CREATE TABLE IF NOT EXISTS list_elements(
	session TEXT NOT NULL, state_key TEXT NOT NULL, id INTEGER NOT NULL, value TEXT NOT NULL,
	removed_at INTEGER,
	PRIMARY KEY(session, state_key, id));
CREATE TABLE IF NOT EXISTS list_clears(
	session TEXT NOT NULL, state_key TEXT NOT NULL, seq INTEGER NOT NULL,
	PRIMARY KEY(session, state_key, seq));
CREATE TABLE IF NOT EXISTS list_removes(
	session TEXT NOT NULL, state_key TEXT NOT NULL, element INTEGER NOT NULL, seq INTEGER NOT NULL,
	PRIMARY KEY(session, state_key, element));
`

// Open opens (creating if needed) the database at path and the session
// named in opts.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.Session == "" {
		return nil, errors.New("sqlite: Options.Session is required")
	}
	dsn := "file:" + url.PathEscape(path) + "?_journal_mode=WAL&_busy_timeout=10000&_txlock=immediate&_synchronous=NORMAL"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s := &Store{db: db, session: opts.Session}
	if err := s.init(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) init(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("sqlite: create schema: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	defer tx.Rollback()
	var version string
	err = tx.QueryRowContext(ctx, `SELECT value FROM session_metadata WHERE session=? AND key='version'`, s.session).Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO session_metadata(session,key,value) VALUES(?, 'version', ?), (?, 'last_seq', '0')`,
			s.session, StorageVersion, s.session); err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
	case err != nil:
		return fmt.Errorf("sqlite: read version: %w", err)
	case version != StorageVersion:
		return &VersionError{Found: version, Wanted: StorageVersion}
	}
	var last string
	if err := tx.QueryRowContext(ctx, `SELECT value FROM session_metadata WHERE session=? AND key='last_seq'`, s.session).Scan(&last); err != nil {
		return fmt.Errorf("sqlite: read last_seq: %w", err)
	}
	n, err := strconv.ParseInt(last, 10, 64)
	if err != nil {
		return fmt.Errorf("sqlite: bad last_seq %q", last)
	}
	s.lastSeq = ID(n)
	return tx.Commit()
}

// LastSeq is the last committed sequence.
func (s *Store) LastSeq() ID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.lastSeq
}

// Close closes the database. Later calls fail with ErrClosed.
func (s *Store) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.ErrClosed
	}
	s.closed = true
	return s.db.Close()
}

func (s *Store) rlock() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return storage.ErrClosed
	}
	return nil
}

// Commit validates and applies one batch in one transaction.
func (s *Store) Commit(ctx context.Context, batch storage.CommitBatch) (storage.Range, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.Range{}, storage.ErrClosed
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return storage.Range{}, fmt.Errorf("sqlite: begin: %w", err)
	}
	defer tx.Rollback()
	r := &reader{q: tx, session: s.session}
	if err := storage.CheckBatch(ctx, lookup{r}, s.lastSeq, batch); err != nil {
		return storage.Range{}, err
	}
	rng := storage.Range{First: s.lastSeq + 1, Last: s.lastSeq + ID(len(batch.Writes))}
	for i := range batch.Writes {
		if err := r.apply(ctx, &batch.Writes[i], s.lastSeq+1+ID(i)); err != nil {
			return storage.Range{}, fmt.Errorf("sqlite: apply write %d: %w", i, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE session_metadata SET value=? WHERE session=? AND key='last_seq'`,
		strconv.FormatInt(int64(rng.Last), 10), s.session); err != nil {
		return storage.Range{}, fmt.Errorf("sqlite: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return storage.Range{}, fmt.Errorf("sqlite: commit: %w", err)
	}
	s.lastSeq = rng.Last
	return rng, nil
}

// reader runs the backend's queries against the database or a transaction.
type reader struct {
	q       queryer
	session string
}

func nullJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

func marshalOrNull[T any](v []T) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func nullID(id ID) any {
	if id == 0 {
		return nil
	}
	return int64(id)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func isListWrite(t storage.WriteType) bool {
	return t == storage.WriteListAppend || t == storage.WriteListRemove || t == storage.WriteListClear
}

func nsKey(scope storage.Scope, namespace string) string {
	return storage.Address{Scope: scope, Namespace: namespace}.StateKey()
}

func (r *reader) apply(ctx context.Context, w *storage.Write, seq ID) error {
	q, sess := r.q, r.session
	switch w.Type {
	case storage.WriteValueSet, storage.WriteValueDelete, storage.WriteListAppend,
		storage.WriteListRemove, storage.WriteListClear:
		return r.applyState(ctx, w, seq)
	case storage.WriteCreateConversation:
		c := w.Conversation
		var pc, pa any
		if c.Parent != nil {
			pc, pa = int64(c.Parent.ConversationID), int64(c.Parent.At)
		}
		_, err := q.ExecContext(ctx, `INSERT INTO conversations(session,id,parent_conv,parent_at,owner,deleted) VALUES(?,?,?,?,?,0)`,
			sess, int64(c.ID), pc, pa, int64(c.Owner))
		return err
	case storage.WriteDeleteConversation:
		_, err := q.ExecContext(ctx, `UPDATE conversations SET deleted=1 WHERE session=? AND id=?`, sess, int64(w.ID))
		return err
	case storage.WriteEntry:
		e := w.Entry
		model, err := marshalOrNull(e.Model)
		if err != nil {
			return err
		}
		edits, err := marshalOrNull(e.Edits)
		if err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO entries(session,id,conv,kind,key,by_task,data,model,head,edits) VALUES(?,?,?,?,?,?,?,?,?,?)`,
			sess, int64(e.ID), int64(e.ConversationID), e.Kind, e.Key, int64(e.ByTaskID), nullJSON(e.Data), model, nullID(e.Head), edits); err != nil {
			return err
		}
		_, err = q.ExecContext(ctx, `INSERT OR IGNORE INTO entry_kinds(session,kind) VALUES(?,?)`, sess, e.Kind)
		return err
	case storage.WriteTask:
		return r.putTask(ctx, w.Task, true)
	case storage.WritePatch, storage.WriteSettle:
		old, ok, err := r.task(ctx, w.ID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("task %d vanished", w.ID)
		}
		t := *old
		if w.Role != "" {
			t.Status, t.Role = w.Status, w.Role
		}
		if w.State != nil {
			t.State = w.State
		}
		if w.Abort {
			t.Abort = true
		}
		if w.Owns != nil {
			t.Owns = w.Owns
		}
		if err := r.putTask(ctx, &t, false); err != nil {
			return err
		}
		if w.Type == storage.WriteSettle {
			// "scratch_task != 0" lets SQLite use the partial scratch index
			// instead of walking every state key of the session.
			sub := `(SELECT state_key FROM values_index WHERE session=? AND scratch_task=? AND scratch_task != 0)`
			for _, tbl := range []string{"value_versions", "list_elements", "list_clears", "list_removes"} {
				if _, err := q.ExecContext(ctx, `DELETE FROM `+tbl+` WHERE session=? AND state_key IN `+sub, sess, sess, int64(w.ID)); err != nil {
					return err
				}
			}
			_, err := q.ExecContext(ctx, `DELETE FROM values_index WHERE session=? AND scratch_task=? AND scratch_task != 0`, sess, int64(w.ID))
			return err
		}
		return nil
	}
	return fmt.Errorf("unknown write type %q", w.Type)
}

func (r *reader) putTask(ctx context.Context, t *storage.Task, insert bool) error {
	after, err := marshalOrNull(t.After)
	if err != nil {
		return err
	}
	owns, err := marshalOrNull(t.Owns)
	if err != nil {
		return err
	}
	verb := "INSERT"
	if !insert {
		verb = "REPLACE"
	}
	_, err = r.q.ExecContext(ctx, verb+` INTO tasks(session,id,conv,kind,status,role,state,after,background,owns,abort) VALUES(?,?,?,?,?,?,?,?,?,?,?)`,
		r.session, int64(t.ID), int64(t.ConversationID), t.Kind, t.Status, string(t.Role), nullJSON(t.State), after,
		b2i(t.Background), owns, b2i(t.Abort))
	return err
}

func (r *reader) applyState(ctx context.Context, w *storage.Write, seq ID) error {
	q, sess := r.q, r.session
	a := *w.Addr
	key := a.StateKey()
	info, err := r.stateInfo(ctx, key)
	if err != nil {
		return err
	}
	if info == nil {
		info = &stateInfo{rewind: a.Historical(), list: isListWrite(w.Type)}
		scratch := int64(0)
		if a.Scope.Kind == storage.ScopeScratch {
			scratch = int64(a.Scope.ID)
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO values_index(session,state_key,scope_ns,key,rewind,is_list,scratch_task) VALUES(?,?,?,?,?,?,?)`,
			sess, key, nsKey(a.Scope, a.Namespace), a.Key, b2i(info.rewind), b2i(info.list), scratch); err != nil {
			return err
		}
	}
	switch w.Type {
	case storage.WriteValueSet, storage.WriteValueDelete:
		if !info.rewind {
			if _, err := q.ExecContext(ctx, `DELETE FROM value_versions WHERE session=? AND state_key=?`, sess, key); err != nil {
				return err
			}
		}
		var v any
		if w.Type == storage.WriteValueSet {
			v = nullJSON(w.Value)
		}
		_, err := q.ExecContext(ctx, `INSERT INTO value_versions(session,state_key,seq,value,deleted) VALUES(?,?,?,?,?)`,
			sess, key, int64(seq), v, b2i(w.Type == storage.WriteValueDelete))
		return err
	case storage.WriteListAppend:
		_, err := q.ExecContext(ctx, `INSERT INTO list_elements(session,state_key,id,value) VALUES(?,?,?,?)`, sess, key, int64(seq), string(w.Value))
		return err
	case storage.WriteListRemove:
		if info.rewind {
			_, err := q.ExecContext(ctx, `INSERT OR REPLACE INTO list_removes(session,state_key,element,seq) VALUES(?,?,?,?)`, sess, key, int64(w.Element), int64(seq))
			return err
		}
		_, err := q.ExecContext(ctx, `DELETE FROM list_elements WHERE session=? AND state_key=? AND id=?`, sess, key, int64(w.Element))
		return err
	case storage.WriteListClear:
		if info.rewind {
			_, err := q.ExecContext(ctx, `INSERT INTO list_clears(session,state_key,seq) VALUES(?,?,?)`, sess, key, int64(seq))
			return err
		}
		_, err := q.ExecContext(ctx, `DELETE FROM list_elements WHERE session=? AND state_key=?`, sess, key)
		return err
	}
	return nil
}

// lookup implements storage.Lookup with queries inside the commit transaction.
type lookup struct{ r *reader }

func (l lookup) LookupConversation(ctx context.Context, id ID) (storage.Conversation, bool, error) {
	c, ok, err := l.r.conv(ctx, id)
	if err != nil || !ok || c.deleted {
		return storage.Conversation{}, false, err
	}
	return c.rec, true, nil
}

func (l lookup) LookupTask(ctx context.Context, id ID) (*storage.Task, bool, error) {
	return l.r.task(ctx, id)
}

func (l lookup) EntryVisible(ctx context.Context, conversationID, id ID) (bool, error) {
	return l.r.entryVisible(ctx, conversationID, id)
}

func (l lookup) StatePolicy(ctx context.Context, a storage.Address) (bool, bool, bool, error) {
	info, err := l.r.stateInfo(ctx, a.StateKey())
	if err != nil || info == nil {
		return false, false, false, err
	}
	return true, info.rewind, info.list, nil
}

func (l lookup) ListHas(ctx context.Context, a storage.Address, at, id ID) (bool, error) {
	els, _, err := l.r.listElements(ctx, a, at, id, id, false, 1)
	return len(els) > 0, err
}
