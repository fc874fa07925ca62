package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"

	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/internal/filelock"
)

type ID = storage.ID

// StorageVersion is the schema version this package reads and writes.
const StorageVersion = "1"

// ApplicationID is the SQLite header's application id of a pico database
// ("pico" in ASCII), how Open tells its own database from anyone else's.
const ApplicationID = 0x7069636f

// Options configures Open.
type Options struct {
	// Session is the id of the session the store reads and writes; required.
	Session string
	// ReadOnly opens an existing pico database for reading only: no schema
	// is created, nothing is written, no writer lock is taken (a checker
	// reading a copy, or beside a live writer). Commit fails.
	ReadOnly bool
	// Fsync makes every commit durable before Commit returns: SQLite syncs
	// the write-ahead log at each commit (synchronous=FULL). Without it the
	// log is synced at checkpoints only (synchronous=NORMAL): a crash of
	// the process loses nothing committed, a power loss may lose the last
	// commits, as a JSONL store without its Fsync may.
	Fsync bool
	// CommitFault, when set, is asked in every commit after the batch's
	// statements ran, before its COMMIT: an error fails the commit there,
	// as a full disk fails a COMMIT, and the store handles it as any failed
	// transaction (rolled back whole, nothing of the batch kept). A
	// simulator's fault layer injects such failures through it; nil
	// commits every batch.
	CommitFault func() error
}

// ErrNotPicoDatabase is the cause of the error for a SQLite database that
// another program made: Open refuses it and leaves it as it is.
var ErrNotPicoDatabase = errors.New("sqlite: not a pico database")

// ErrReadOnly is what Commit returns on a store opened with ReadOnly.
var ErrReadOnly = errors.New("sqlite: the store was opened read-only")

// batchBytesMax is storage.BatchBytesMax, as a variable only so that this
// package's tests can lower it.
var batchBytesMax = storage.BatchBytesMax

// fileMode keeps the database, its WAL and its shared memory private: SQLite
// creates the latter two with the database file's permissions.
const fileMode = 0o600

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
	if (optional && raw == "") || jsonvalue.Valid([]byte(raw)) {
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
	// w is the connection every commit runs on, held from Open to Close
	// (nil on a read-only store); reads go through db's other connections.
	w        *sql.Conn
	path     string
	session  string
	readOnly bool
	lock     *filelock.Lock
	memo     *commitMemo // what commits and reads learned; nil after a failed commit
	memoMu   sync.Mutex  // held by a read looking up or adding to memo
	sizeBuf  []byte      // where a commit measures its batch (encodedSize)
	claimed  bool        // a harness holds this handle (Claim)
	// commitFault is Options.CommitFault.
	commitFault func() error
	// poisoned is the first failure after which this handle can no longer
	// trust what it knows (another writer moved last_seq); every later
	// commit returns it.
	poisoned error
}

var _ storage.Storage = (*Store)(nil)

// queryer is what *sql.DB, *sql.Tx and a commit's writeTx offer.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// schema is the tables and indexes, created by every writer's open. Every
// index is written by every commit that changes a row it covers, so the
// live and keyed indexes are partial: tasks_live holds only live tasks
// (a task entering inflight changes none of its columns), entries_keyed
// only entries with a key. The open drops the full indexes they replace
// (tasks_role, tasks_conv_role, entries_key), which databases written
// before them have; the tables are the same.
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
DROP INDEX IF EXISTS entries_key;
CREATE INDEX IF NOT EXISTS entries_keyed ON entries(session, conv, key, id) WHERE key != '';
CREATE INDEX IF NOT EXISTS entries_heads ON entries(session, conv, id) WHERE head IS NOT NULL;
CREATE TABLE IF NOT EXISTS entry_kinds(
	session TEXT NOT NULL, kind TEXT NOT NULL, PRIMARY KEY(session, kind));
CREATE TABLE IF NOT EXISTS tasks(
	session TEXT NOT NULL, id INTEGER NOT NULL, conv INTEGER NOT NULL, kind TEXT NOT NULL,
	status TEXT NOT NULL, role TEXT NOT NULL, state TEXT, after TEXT,
	background INTEGER NOT NULL DEFAULT 0, owns TEXT, abort INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY(session, id));
DROP INDEX IF EXISTS tasks_role;
DROP INDEX IF EXISTS tasks_conv_role;
CREATE INDEX IF NOT EXISTS tasks_live ON tasks(session, id) WHERE role IN ('start','inflight');
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
// named in opts. A new database is created 0600 with its schema and pico's
// application id in one transaction; an existing one must be a pico
// database, and anyone else's is refused untouched (ErrNotPicoDatabase).
// A session has one writer: a second Open of the same session while the
// first is open, in this process or another, fails with a
// *storage.LockedError (ReadOnly opens take no lock).
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.Session == "" {
		return nil, errors.New("sqlite: Options.Session is required")
	}
	s := &Store{path: path, session: opts.Session, readOnly: opts.ReadOnly, commitFault: opts.CommitFault}
	if !opts.ReadOnly {
		lock, err := filelock.Acquire(lockPath(path, opts.Session), fmt.Sprintf("%s (session %q)", path, opts.Session))
		if err != nil {
			return nil, err
		}
		s.lock = lock
		if err := createPrivate(path); err != nil {
			lock.Release()
			return nil, err
		}
	}
	dsn := "file:" + url.PathEscape(path) + "?" + dsnParams(opts)
	if opts.ReadOnly {
		dsn += "&mode=ro"
	}
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		s.lock.Release()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s.db = db
	if err := s.init(ctx); err != nil {
		if s.w != nil {
			s.w.Close()
		}
		db.Close()
		s.lock.Release()
		return nil, err
	}
	return s, nil
}

// stmtCacheSize is how many prepared statements each connection keeps
// (the driver's _stmt_cache_size): more than the backend's distinct
// queries, so a commit prepares nothing after the first few.
const stmtCacheSize = 64

// pageCacheKiB bounds each connection's page cache (SQLite's default is
// 2,000 KiB): what a session's process holds of the database stays the
// same however long its history grows.
const pageCacheKiB = 1024

// pageSize is the page size of a database Open creates (SQLite's default
// is 4,096). A commit writes every page it changes to the write-ahead log,
// a few pages of tables and indexes for even the smallest batch, so small
// pages make a commit's log write a quarter the size: turns on SQLite ran
// about a fifth faster, for about 7% more bytes on disk once closed. A
// database made with another size keeps it.
const pageSize = 1024

// walCheckpointPages is how many pages the write-ahead log holds before a
// commit checkpoints it into the database (SQLite's wal_autocheckpoint, on
// the writer connection, the one that commits). SQLite's default, 1,000
// pages, is a 4 MB log at its default page size; at pageSize it would be a
// quarter of that, and a checkpoint every hundred-odd commits. 4,096 keeps
// the log at about SQLite's 4 MB, which it is while a session is open:
// Close checkpoints it into the database and removes it. Turns on SQLite
// ran about 7% faster (picosim bench, 1,000 bounded turns, five
// alternating pairs: 427-462 against 448-521 turns/s).
const walCheckpointPages = 4096

// dsnParams are the connection parameters of every connection Open makes:
// the busy timeout, immediate write transactions, the sync mode of
// opts.Fsync, the statement cache and the page cache's bound.
func dsnParams(opts Options) string {
	sync := "NORMAL"
	if opts.Fsync {
		sync = "FULL"
	}
	return fmt.Sprintf("_busy_timeout=10000&_txlock=immediate&_synchronous=%s&_stmt_cache_size=%d&_cache_size=-%d", sync, stmtCacheSize, pageCacheKiB)
}

// lockPath is the writer lock of one session of the database at path: a
// file beside it, named by a hash of the session name, so any name is a
// safe file name.
func lockPath(path, session string) string {
	sum := sha256.Sum256([]byte(session))
	return fmt.Sprintf("%s.%s.lock", path, hex.EncodeToString(sum[:8]))
}

// createPrivate creates the database file 0600 if there is none, so that
// SQLite (which gives its WAL and shared-memory files the database file's
// mode) never makes a world-readable session.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fileMode)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return fmt.Errorf("sqlite: create %s: %w", path, err)
	}
	return f.Close()
}

// init identifies the database before touching it, creates the schema of a
// new one in one transaction, switches it to WAL, and reads the session's
// version and last sequence (creating the session's rows if need be). A
// writer does it all on the connection it keeps for its commits, so a new
// database's page size is set on the connection that creates the file.
func (s *Store) init(ctx context.Context) error {
	fresh, err := s.identify(ctx)
	if err != nil {
		return err
	}
	if s.readOnly {
		if fresh {
			return fmt.Errorf("%w: %s holds no pico sessions", ErrNotPicoDatabase, s.path)
		}
		return s.readSession(ctx, s.db)
	}
	w, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	s.w = w
	if fresh {
		// A no-op on a file that already has pages: it keeps its size.
		if _, err := w.ExecContext(ctx, fmt.Sprintf(`PRAGMA page_size=%d`, pageSize)); err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
	}
	if _, err := w.ExecContext(ctx, `PRAGMA journal_mode=WAL`); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	if _, err := w.ExecContext(ctx, fmt.Sprintf(`PRAGMA wal_autocheckpoint=%d`, walCheckpointPages)); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, schema+fmt.Sprintf("PRAGMA application_id=%d;", ApplicationID)); err != nil {
		return fmt.Errorf("sqlite: create schema: %w", err)
	}
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
	}
	if err := s.readSession(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: create schema: %w", err)
	}
	return nil
}

// identify tells a new, empty database (fresh) from a pico one, and refuses
// anything else without writing to it. A database this package made before
// it set an application id is recognized by its session table.
func (s *Store) identify(ctx context.Context) (fresh bool, err error) {
	var appID int64
	if err := s.db.QueryRowContext(ctx, `PRAGMA application_id`).Scan(&appID); err != nil {
		return false, fmt.Errorf("sqlite: %s: %w", s.path, err)
	}
	if appID == ApplicationID {
		return false, nil
	}
	if appID != 0 {
		return false, fmt.Errorf("%w: %s has application id %#x", ErrNotPicoDatabase, s.path, appID)
	}
	var tables int
	var ours bool
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type='table'`)
	if err != nil {
		return false, fmt.Errorf("sqlite: %s: %w", s.path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return false, fmt.Errorf("sqlite: %s: %w", s.path, err)
		}
		tables++
		ours = ours || name == "session_metadata"
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("sqlite: %s: %w", s.path, err)
	}
	switch {
	case tables == 0:
		return true, nil
	case !ours:
		return false, fmt.Errorf("%w: %s holds %d tables of another program", ErrNotPicoDatabase, s.path, tables)
	}
	return false, nil
}

// readSession reads the session's version and last sequence.
func (s *Store) readSession(ctx context.Context, q queryer) error {
	var version string
	err := q.QueryRowContext(ctx, `SELECT value FROM session_metadata WHERE session=? AND key='version'`, s.session).Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return &SessionNotFoundError{Path: s.path, Session: s.session}
	case err != nil:
		return fmt.Errorf("sqlite: read version: %w", err)
	case version != StorageVersion:
		return &VersionError{Found: version, Wanted: StorageVersion}
	}
	last, err := readLastSeq(ctx, q, s.session)
	if err != nil {
		return err
	}
	s.lastSeq = last
	return nil
}

func readLastSeq(ctx context.Context, q queryer, session string) (ID, error) {
	var last string
	stmt := `SELECT value FROM session_metadata WHERE session=? AND key='last_seq'`
	if plant.On("sqlite-last-seq-any-session") {
		stmt = `SELECT value FROM session_metadata WHERE (session=? OR 1) AND key='last_seq'`
	}
	if err := q.QueryRowContext(ctx, stmt, session).Scan(&last); err != nil {
		return 0, fmt.Errorf("sqlite: read last_seq: %w", err)
	}
	n, err := strconv.ParseInt(last, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("sqlite: bad last_seq %q", last)
	}
	return ID(n), nil
}

// SessionNotFoundError is what a read-only open of a session the database
// does not hold returns.
type SessionNotFoundError struct {
	Path, Session string
}

func (e *SessionNotFoundError) Error() string {
	return fmt.Sprintf("sqlite: %s holds no session %q", e.Path, e.Session)
}

// Sessions lists the sessions a pico database at path holds, reading it
// only.
func Sessions(ctx context.Context, path string) ([]string, error) {
	db, err := sql.Open("sqlite3", "file:"+url.PathEscape(path)+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	defer db.Close()
	s := &Store{db: db, path: path}
	fresh, err := s.identify(ctx)
	if err != nil || fresh {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT session FROM session_metadata ORDER BY session`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", path, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("sqlite: %s: %w", path, err)
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

// LastSeq is the last committed sequence.
func (s *Store) LastSeq() ID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.lastSeq
}

// Claim admits one harness at a time on this handle (storage.Claimer);
// other handles and processes are kept out by the session's lock file.
func (s *Store) Claim() (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed {
		return nil, &storage.LockedError{Session: fmt.Sprintf("%s (session %q)", s.path, s.session), Holder: "another open harness in this process"}
	}
	s.claimed = true
	return func() {
		s.mu.Lock()
		s.claimed = false
		s.mu.Unlock()
	}, nil
}

// Close closes the database and releases the session's writer lock.
// Later calls fail with ErrClosed.
func (s *Store) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.ErrClosed
	}
	s.closed = true
	var err error
	if s.w != nil {
		if err = s.w.Close(); errors.Is(err, sql.ErrConnDone) {
			err = nil // discarded after a failed rollback
		}
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	if lerr := s.lock.Release(); err == nil {
		err = lerr
	}
	return err
}

func (s *Store) rlock() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return storage.ErrClosed
	}
	return nil
}

// Commit validates and applies one batch in one transaction. It reads
// last_seq inside that transaction: if another writer moved it, nothing is
// written and the handle is poisoned (its view of the session is stale). A
// batch over storage.BatchBytesMax is refused before anything is written. A
// failed transaction (a full disk, say) rolls back whole: nothing of the
// batch is stored and the store stays usable.
func (s *Store) Commit(ctx context.Context, batch storage.CommitBatch) (storage.Range, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return storage.Range{}, storage.ErrClosed
	case s.readOnly:
		return storage.Range{}, ErrReadOnly
	case s.poisoned != nil:
		return storage.Range{}, &storage.PoisonedError{Err: s.poisoned}
	}
	tx, err := s.begin(ctx)
	if err != nil {
		return storage.Range{}, fmt.Errorf("sqlite: begin: %w", err)
	}
	defer func() {
		if tx.done {
			return
		}
		if !plant.On("sqlite-memo-survives-rollback") {
			s.memo = nil // it holds what the rolled-back writes did
		}
		if err := tx.rollback(); err != nil {
			s.discardWriter(err)
		}
	}()
	ctx = context.WithoutCancel(ctx)
	rng := storage.Range{First: s.lastSeq + 1, Last: s.lastSeq + ID(len(batch.Writes))}
	if err := s.claimSeqs(ctx, tx, rng.Last); err != nil {
		return storage.Range{}, err
	}
	if s.memo == nil || s.memo.size() > commitMemoMax {
		s.memo = newCommitMemo()
	}
	r := &reader{q: tx, session: s.session, memo: s.memo}
	if err := storage.CheckBatch(ctx, lookup{r}, s.lastSeq, batch); err != nil {
		return storage.Range{}, err
	}
	if n, err := s.encodedSize(batch); err != nil || n > batchBytesMax {
		if err != nil {
			return storage.Range{}, fmt.Errorf("sqlite: encoding batch %d: %w", s.lastSeq+1, err)
		}
		return storage.Range{}, &storage.BatchError{Index: -1, Seq: s.lastSeq + 1, Rule: "batch over the size limit", Err: &storage.BatchTooLargeError{Bytes: n, Max: batchBytesMax}}
	}
	for i := range batch.Writes {
		if err := r.apply(ctx, &batch.Writes[i], s.lastSeq+1+ID(i)); err != nil {
			return storage.Range{}, fmt.Errorf("sqlite: apply write %d (rolled back: nothing of the batch is stored): %w", i, err)
		}
	}
	if plant.On("sqlite-seq-before-commit") {
		s.lastSeq = rng.Last
	}
	if err := s.commitNow(ctx, tx); err != nil {
		return storage.Range{}, fmt.Errorf("sqlite: commit (rolled back: nothing of the batch is stored): %w", err)
	}
	s.lastSeq = rng.Last
	return rng, nil
}

// commitNow ends the commit's transaction with its COMMIT, unless
// Options.CommitFault fails it first.
func (s *Store) commitNow(ctx context.Context, tx *writeTx) error {
	if s.commitFault != nil {
		if err := s.commitFault(); err != nil {
			return err
		}
	}
	return tx.commit(ctx)
}

// claimSeqs moves the stored last_seq from the handle's to last, first
// thing in a commit's transaction, in one statement that finds the row only
// if it still holds the handle's value. If another writer moved it, the
// handle is poisoned (its view of the session is stale) and nothing is
// written; the rollback undoes the move if the batch then fails.
func (s *Store) claimSeqs(ctx context.Context, tx *writeTx, last ID) error {
	res, err := tx.ExecContext(ctx, `UPDATE session_metadata SET value=? WHERE session=? AND key='last_seq' AND value=?`,
		strconv.FormatInt(int64(last), 10), s.session, strconv.FormatInt(int64(s.lastSeq), 10))
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	stored, err := readLastSeq(ctx, tx, s.session)
	if err != nil {
		return err
	}
	if stored != s.lastSeq {
		s.poisoned = &storage.LockedError{Session: fmt.Sprintf("%s (session %q)", s.path, s.session),
			Holder: fmt.Sprintf("another writer moved last_seq from %d to %d under this handle", s.lastSeq, stored)}
		return s.poisoned
	}
	// The same number written another way (by hand: "007"): write ours.
	_, err = tx.ExecContext(ctx, `UPDATE session_metadata SET value=? WHERE session=? AND key='last_seq'`,
		strconv.FormatInt(int64(last), 10), s.session)
	return err
}

// writeTx is one write transaction on the store's writer connection, begun
// and ended by statements rather than database/sql's Tx: a Tx watches its
// context with a goroutine of its own, and so does each query in it, which
// cost a commit more than its statements did. Commit runs the statements
// between begin and commit with a context that is never cancelled, so a
// commit once begun ends in COMMIT or ROLLBACK as a whole, never cut off
// between two of its statements by the caller's cancellation.
type writeTx struct {
	*sql.Conn
	done bool
}

// begin waits for the database's write lock (BEGIN IMMEDIATE, within the
// busy timeout). SQLite's wait does not end with ctx, so a ctx that ended
// while it waited (a deadline) gets the lock given back: the caller gave
// up, and the commit does not land after it did.
func (s *Store) begin(ctx context.Context) (*writeTx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := s.w.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return nil, err
	}
	tx := &writeTx{Conn: s.w}
	if err := ctx.Err(); err != nil {
		if rerr := tx.rollback(); rerr != nil {
			s.discardWriter(rerr)
		}
		return nil, err
	}
	return tx, nil
}

func (tx *writeTx) commit(ctx context.Context) error {
	if _, err := tx.ExecContext(ctx, `COMMIT`); err != nil {
		return err
	}
	tx.done = true
	return nil
}

// discardWriter handles a ROLLBACK that failed, which leaves the writer
// connection inside its transaction, holding the database's write lock
// that other sessions' writers wait for: it closes the connection (SQLite
// rolls back what a closed connection began) and poisons the store with
// err.
func (s *Store) discardWriter(err error) {
	s.w.Raw(func(any) error { return driver.ErrBadConn }) // database/sql closes a connection that reports it bad
	if s.poisoned == nil {
		s.poisoned = fmt.Errorf("sqlite: rollback failed, the writer connection was closed: %w", err)
	}
}

// rollback ends the transaction unless it committed or SQLite ended it
// already (as it may when a statement or the COMMIT fails on a full disk).
// Its error leaves the writer connection inside a transaction: the caller
// discards the connection (discardWriter).
func (tx *writeTx) rollback() error {
	if tx.done {
		return nil
	}
	tx.done = true
	open := true // unless the driver says otherwise
	if err := tx.Raw(func(dc any) error {
		if c, ok := dc.(interface{ AutoCommit() bool }); ok {
			open = !c.AutoCommit()
		}
		return nil
	}); err != nil || !open {
		return err
	}
	_, err := tx.ExecContext(context.Background(), `ROLLBACK`)
	return err
}

// encodedSize is how many bytes of JSON the batch's writes encode to: what
// the size limit holds a batch to, as JSONL holds its line. It writes them
// into s.sizeBuf, kept for the next commit unless it grew past
// sizeBufMax.
func (s *Store) encodedSize(batch storage.CommitBatch) (int, error) {
	raw, ok := storage.AppendWrites(s.sizeBuf[:0], batch.Writes)
	if cap(raw) <= sizeBufMax {
		s.sizeBuf = raw[:0]
	}
	if ok {
		return len(raw), nil
	}
	raw, err := json.Marshal(batch.Writes)
	return len(raw), err
}

// sizeBufMax bounds the buffer a store keeps for measuring batches.
const sizeBufMax = 64 << 10

// reader runs the backend's queries against the database or a transaction.
type reader struct {
	q       queryer
	session string
	// memo keeps what commits and reads looked up: the batch check and
	// the writes after it ask for the same conversations, state keys and
	// tasks, and so do the next commit and the reads between. The store is
	// the session's only writer (its lock file, and last_seq checked first
	// in every commit), so an answer only changes by its own writes, which
	// update the memo; a commit that fails drops it. (Were two writers to
	// meet anyway, the stale one's reads would trust the memo until its next
	// commit finds last_seq moved.)
	memo *commitMemo
	// shared, on a read's reader, is the lock of the memo it shares with
	// the reads beside it (a commit runs alone: nil).
	shared *sync.Mutex
}

// commitMemo is what the store's commits read or wrote of conversations,
// state keys and tasks (a nil value: none stored), and the entry kinds
// they know are in entry_kinds.
type commitMemo struct {
	convs map[ID]*convRow
	infos map[string]*stateInfo
	tasks map[ID]*storage.Task
	kinds map[string]bool
	// latest is each value's newest version, when it is small (at most
	// valueMemoMax bytes); nil when the key has none.
	latest map[string]*version
}

// valueMemoMax bounds the values the memo keeps: a larger one is read
// from the database every time, so the memo holds little of a session
// that stores large values.
const valueMemoMax = 1024

// stateless is what the memo keeps of a task: all but its state, which no
// lookup of the batch check reads and a patch writes only when it carries
// one (updateTask), so the memo does not hold a large state past its
// commit.
func stateless(t *storage.Task) *storage.Task {
	if t == nil {
		return nil
	}
	c := *t
	c.State = nil
	return &c
}

// commitMemoMax bounds a commit memo's records: past it the next commit
// starts a new one, so a long session's process holds no more of it.
const commitMemoMax = 4096

func newCommitMemo() *commitMemo {
	return &commitMemo{convs: map[ID]*convRow{}, infos: map[string]*stateInfo{}, tasks: map[ID]*storage.Task{}, kinds: map[string]bool{},
		latest: map[string]*version{}}
}

func (m *commitMemo) size() int {
	return len(m.convs) + len(m.infos) + len(m.tasks) + len(m.kinds) + len(m.latest)
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
		if r.memo != nil {
			rec := *c
			if c.Parent != nil { // the batch's, which readers are not handed
				p := *c.Parent
				rec.Parent = &p
			}
			r.memo.convs[c.ID] = &convRow{rec: rec}
		}
		_, err := q.ExecContext(ctx, `INSERT INTO conversations(session,id,parent_conv,parent_at,owner,deleted) VALUES(?,?,?,?,?,0)`,
			sess, int64(c.ID), pc, pa, int64(c.Owner))
		return err
	case storage.WriteDeleteConversation:
		if r.memo != nil {
			delete(r.memo.convs, w.ID) // read again when asked
		}
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
		if r.memo != nil && r.memo.kinds[e.Kind] {
			return nil
		}
		if _, err = q.ExecContext(ctx, `INSERT OR IGNORE INTO entry_kinds(session,kind) VALUES(?,?)`, sess, e.Kind); err != nil {
			return err
		}
		if r.memo != nil {
			r.memo.kinds[e.Kind] = true
		}
		return nil
	case storage.WriteTask:
		if r.memo != nil {
			r.memo.tasks[w.Task.ID] = stateless(w.Task)
		}
		return r.insertTask(ctx, w.Task)
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
		if err := r.updateTask(ctx, &t, w); err != nil {
			return err
		}
		if r.memo != nil {
			r.memo.tasks[t.ID] = stateless(&t)
		}
		if w.Type == storage.WriteSettle {
			return r.retireScratch(ctx, w.ID)
		}
		return nil
	}
	return fmt.Errorf("unknown write type %q", w.Type)
}

// retireScratch deletes a settled task's scratch: each of its state keys'
// rows from the one table that holds them (scratch never rewinds, so a
// list's are its elements, a value's its versions), then the keys, which
// the memo forgets. A task that wrote no scratch costs one query.
func (r *reader) retireScratch(ctx context.Context, task ID) error {
	q, sess := r.q, r.session
	type scratchKey struct {
		key  string
		list bool
	}
	// "scratch_task != 0" lets SQLite use the partial scratch index instead
	// of walking every state key of the session.
	keys, err := queryAll(ctx, q, func(sc interface{ Scan(...any) error }) (scratchKey, error) {
		var k scratchKey
		var list int
		err := sc.Scan(&k.key, &list)
		k.list = list != 0 != plant.On("sqlite-retire-wrong-table")
		return k, err
	}, `SELECT state_key, is_list FROM values_index WHERE session=? AND scratch_task=? AND scratch_task != 0`, sess, int64(task))
	if err != nil || len(keys) == 0 {
		return err
	}
	for _, k := range keys {
		if r.memo != nil {
			delete(r.memo.infos, k.key)
			delete(r.memo.latest, k.key)
		}
		del := `DELETE FROM value_versions WHERE session=? AND state_key=?`
		if k.list {
			del = `DELETE FROM list_elements WHERE session=? AND state_key=?`
		}
		if _, err := q.ExecContext(ctx, del, sess, k.key); err != nil {
			return err
		}
	}
	_, err = q.ExecContext(ctx, `DELETE FROM values_index WHERE session=? AND scratch_task=? AND scratch_task != 0`, sess, int64(task))
	return err
}

// updateTask writes what a patch or settle changes of a stored task: its
// state, owns and abort mark, and its status and role when w sets them.
// Unlike a REPLACE (a delete and an insert), an UPDATE leaves the indexes
// on columns it does not set alone, so a patch of state only rewrites the
// row and no task index.
func (r *reader) updateTask(ctx context.Context, t *storage.Task, w *storage.Write) error {
	owns, err := marshalOrNull(t.Owns)
	if err != nil {
		return err
	}
	switch {
	case w.Role == "" && w.State == nil:
		_, err = r.q.ExecContext(ctx, `UPDATE tasks SET owns=?, abort=? WHERE session=? AND id=?`,
			owns, b2i(t.Abort), r.session, int64(t.ID))
	case w.Role == "":
		_, err = r.q.ExecContext(ctx, `UPDATE tasks SET state=?, owns=?, abort=? WHERE session=? AND id=?`,
			nullJSON(t.State), owns, b2i(t.Abort), r.session, int64(t.ID))
	case w.State == nil:
		_, err = r.q.ExecContext(ctx, `UPDATE tasks SET status=?, role=?, owns=?, abort=? WHERE session=? AND id=?`,
			t.Status, string(t.Role), owns, b2i(t.Abort), r.session, int64(t.ID))
	default:
		_, err = r.q.ExecContext(ctx, `UPDATE tasks SET status=?, role=?, state=?, owns=?, abort=? WHERE session=? AND id=?`,
			t.Status, string(t.Role), nullJSON(t.State), owns, b2i(t.Abort), r.session, int64(t.ID))
	}
	return err
}

// insertTask stores a new task.
func (r *reader) insertTask(ctx context.Context, t *storage.Task) error {
	after, err := marshalOrNull(t.After)
	if err != nil {
		return err
	}
	owns, err := marshalOrNull(t.Owns)
	if err != nil {
		return err
	}
	_, err = r.q.ExecContext(ctx, `INSERT INTO tasks(session,id,conv,kind,status,role,state,after,background,owns,abort) VALUES(?,?,?,?,?,?,?,?,?,?,?)`,
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
		if r.memo != nil {
			r.memo.infos[key] = info
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
		if _, err := q.ExecContext(ctx, `INSERT INTO value_versions(session,state_key,seq,value,deleted) VALUES(?,?,?,?,?)`,
			sess, key, int64(seq), v, b2i(w.Type == storage.WriteValueDelete)); err != nil {
			return err
		}
		if r.memo != nil {
			delete(r.memo.latest, key)
			if len(w.Value) <= valueMemoMax {
				r.memo.latest[key] = &version{seq: seq, deleted: w.Type == storage.WriteValueDelete, value: slices.Clone([]byte(w.Value))}
			}
		}
		return nil
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
