package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

const maxID = ID(math.MaxInt64)

type convRow struct {
	rec     storage.Conversation
	deleted bool
}

func (r *reader) conv(ctx context.Context, id ID) (convRow, bool, error) {
	if r.memo != nil {
		if c, ok := recall(r, r.memo.convs, id); ok {
			if c == nil {
				return convRow{}, false, nil
			}
			return *c, true, nil
		}
	}
	var (
		c      convRow
		pc, pa sql.NullInt64
		owner  int64
		del    int
	)
	err := r.q.QueryRowContext(ctx, `SELECT parent_conv, parent_at, owner, deleted FROM conversations WHERE session=? AND id=?`,
		r.session, int64(id)).Scan(&pc, &pa, &owner, &del)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if r.memo != nil {
			remember(r, r.memo.convs, id, nil)
		}
		return c, false, nil
	case err != nil:
		return c, false, err
	}
	c.rec.ID, c.rec.Owner, c.deleted = id, ID(owner), del != 0
	if pc.Valid {
		c.rec.Parent = &storage.ParentRef{ConversationID: ID(pc.Int64), At: ID(pa.Int64)}
	}
	if r.memo != nil {
		remember(r, r.memo.convs, id, &c)
	}
	return c, true, nil
}

const taskCols = `id, conv, kind, status, role, state, after, background, owns, abort`

func scanTask(sc interface{ Scan(...any) error }) (*storage.Task, error) {
	var (
		t                  storage.Task
		id, conv           int64
		role               string
		state, after, owns sql.NullString
		bg, abort          int
	)
	if err := sc.Scan(&id, &conv, &t.Kind, &t.Status, &role, &state, &after, &bg, &owns, &abort); err != nil {
		return nil, scanError("tasks", err)
	}
	t.ID, t.ConversationID, t.Role, t.Background, t.Abort = ID(id), ID(conv), storage.TaskRole(role), bg != 0, abort != 0
	if state.Valid {
		if err := checkJSON("tasks", t.ID, "state", state.String, true); err != nil {
			return nil, err
		}
		t.State = json.RawMessage(state.String)
	}
	if after.Valid {
		if err := json.Unmarshal([]byte(after.String), &t.After); err != nil {
			return nil, &RowError{Table: "tasks", Row: t.ID, Column: "after", Err: err}
		}
	}
	if owns.Valid {
		if err := json.Unmarshal([]byte(owns.String), &t.Owns); err != nil {
			return nil, &RowError{Table: "tasks", Row: t.ID, Column: "owns", Err: err}
		}
	}
	return &t, nil
}

func (r *reader) task(ctx context.Context, id ID) (*storage.Task, bool, error) {
	if r.memo != nil {
		if t, ok := recall(r, r.memo.tasks, id); ok {
			return t, t != nil, nil
		}
	}
	t, err := scanTask(r.q.QueryRowContext(ctx, `SELECT `+taskCols+` FROM tasks WHERE session=? AND id=?`, r.session, int64(id)))
	if errors.Is(err, sql.ErrNoRows) {
		t, err = nil, nil
	}
	if err != nil {
		return nil, false, err
	}
	if r.memo != nil {
		remember(r, r.memo.tasks, id, stateless(t))
	}
	return t, t != nil, nil
}

const entryCols = `id, conv, kind, key, by_task, data, model, head, edits`

func scanEntry(sc interface{ Scan(...any) error }) (*storage.Entry, error) {
	var (
		e                  storage.Entry
		id, conv, by       int64
		data, model, edits sql.NullString
		head               any // an integer or NULL; scanned loose to name a bad row
	)
	if err := sc.Scan(&id, &conv, &e.Kind, &e.Key, &by, &data, &model, &head, &edits); err != nil {
		return nil, scanError("entries", err)
	}
	e.ID, e.ConversationID, e.ByTaskID = ID(id), ID(conv), ID(by)
	switch h := head.(type) {
	case nil:
	case int64:
		e.Head = ID(h)
	default:
		return nil, &RowError{Table: "entries", Row: e.ID, Column: "head", Err: fmt.Errorf("stored as %T, not an integer", h)}
	}
	if data.Valid {
		if err := checkJSON("entries", e.ID, "data", data.String, true); err != nil {
			return nil, err
		}
		e.Data = json.RawMessage(data.String)
	}
	if model.Valid {
		if err := json.Unmarshal([]byte(model.String), &e.Model); err != nil {
			return nil, &RowError{Table: "entries", Row: e.ID, Column: "model", Err: err}
		}
	}
	if edits.Valid {
		if err := json.Unmarshal([]byte(edits.String), &e.Edits); err != nil {
			return nil, &RowError{Table: "entries", Row: e.ID, Column: "edits", Err: err}
		}
	}
	return &e, nil
}

func queryAll[T any](ctx context.Context, q queryer, scan func(interface{ Scan(...any) error }) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		x, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// level is one conversation of a fork chain and the last visible position.
type level struct {
	conv ID
	cap  ID
}

// chain walks from a conversation up through its fork sources, newest first.
func (r *reader) chain(ctx context.Context, id, at ID) ([]level, error) {
	if at <= 0 {
		at = maxID
	}
	var levels []level
	for {
		c, ok, err := r.conv(ctx, id)
		if err != nil {
			return nil, err
		}
		if !ok {
			return levels, nil
		}
		levels = append(levels, level{id, at})
		if c.rec.Parent == nil {
			return levels, nil
		}
		at = min(at, c.rec.Parent.At)
		id = c.rec.Parent.ConversationID
	}
}

func (r *reader) entryVisible(ctx context.Context, convID, id ID) (bool, error) {
	var owner int64
	err := r.q.QueryRowContext(ctx, `SELECT conv FROM entries WHERE session=? AND id=?`, r.session, int64(id)).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	levels, err := r.chain(ctx, convID, 0)
	if err != nil {
		return false, err
	}
	for _, l := range levels {
		if l.conv == ID(owner) {
			return id <= l.cap, nil
		}
	}
	return false, nil
}

type stateInfo struct{ rewind, list bool }

func (r *reader) stateInfo(ctx context.Context, key string) (*stateInfo, error) {
	if r.memo != nil {
		if info, ok := recall(r, r.memo.infos, key); ok {
			return info, nil
		}
	}
	var rw, list int
	var info *stateInfo
	err := r.q.QueryRowContext(ctx, `SELECT rewind, is_list FROM values_index WHERE session=? AND state_key=?`, r.session, key).Scan(&rw, &list)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, err
	default:
		info = &stateInfo{rewind: rw != 0, list: list != 0}
	}
	if r.memo != nil {
		remember(r, r.memo.infos, key, info)
	}
	return info, nil
}

// segment is one level's contribution to a logical sequence: ids in [lo, cap].
type segment struct {
	conv    ID
	key     string
	lo, cap ID
}

// span fetches up to n items of a logical sequence made of segments (oldest
// first) within [lo, hi], forward or backward, in walk order.
func span[T any](segs []segment, lo, hi ID, backward bool, n int, fetch func(sg segment, lo, hi ID, backward bool, n int) ([]T, error)) ([]T, error) {
	var out []T
	visit := func(sg segment) error {
		l, h := max(lo, sg.lo), min(hi, sg.cap)
		if l > h {
			return nil
		}
		items, err := fetch(sg, l, h, backward, n-len(out))
		out = append(out, items...)
		return err
	}
	if !backward {
		for _, sg := range segs {
			if len(out) >= n {
				break
			}
			if err := visit(sg); err != nil {
				return nil, err
			}
		}
	} else {
		for k := len(segs) - 1; k >= 0 && len(out) < n; k-- {
			if err := visit(segs[k]); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func order(backward bool) string {
	if backward {
		return " DESC"
	}
	return " ASC"
}

// rd is a reader of the database for one read, holding s.mu's read lock.
// It shares the commits' memo with the reads beside it, under memoMu.
func (s *Store) rd() *reader {
	return &reader{q: s.db, session: s.session, memo: s.memo, shared: &s.memoMu}
}

// recall looks k up in m, one of the reader's memo's maps.
func recall[K comparable, V any](r *reader, m map[K]V, k K) (V, bool) {
	if r.shared != nil {
		r.shared.Lock()
		defer r.shared.Unlock()
	}
	v, ok := m[k]
	return v, ok
}

// remember records v for k in m, one of the reader's memo's maps. A read
// adds nothing to a memo that is full: only a commit starts a new one.
func remember[K comparable, V any](r *reader, m map[K]V, k K, v V) {
	if r.shared != nil {
		r.shared.Lock()
		defer r.shared.Unlock()
		if r.memo.size() >= commitMemoMax {
			return
		}
	}
	m[k] = v
}

func (r *reader) conversationExists(ctx context.Context, id ID) error {
	c, ok, err := r.conv(ctx, id)
	if err != nil {
		return err
	}
	if !ok || c.deleted {
		return fmt.Errorf("%w: conversation %d does not exist", storage.ErrBadQuery, id)
	}
	return nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

func idArgs(ids []ID) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

// GetConversations returns the named conversations that exist.
func (s *Store) GetConversations(ctx context.Context, ids []ID) (map[ID]storage.Conversation, error) {
	if err := s.rlock(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	r := s.rd()
	out := make(map[ID]storage.Conversation, len(ids))
	for _, id := range ids {
		c, ok, err := r.conv(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok && !c.deleted {
			out[id] = c.rec
		}
	}
	return out, nil
}

func scanConv(sc interface{ Scan(...any) error }) (storage.Conversation, error) {
	var (
		c         storage.Conversation
		id, owner int64
		pc, pa    sql.NullInt64
	)
	if err := sc.Scan(&id, &pc, &pa, &owner); err != nil {
		return c, err
	}
	c.ID, c.Owner = ID(id), ID(owner)
	if pc.Valid {
		c.Parent = &storage.ParentRef{ConversationID: ID(pc.Int64), At: ID(pa.Int64)}
	}
	return c, nil
}

// ScanConversations pages through conversations.
func (s *Store) ScanConversations(ctx context.Context, q storage.ConversationQuery) (storage.Page[storage.Conversation], error) {
	q.Cursor = q.Cursor.Defaulted()
	if err := storage.CheckCursor(q.Cursor); err != nil {
		return storage.Page[storage.Conversation]{}, err
	}
	if err := s.rlock(); err != nil {
		return storage.Page[storage.Conversation]{}, err
	}
	defer s.mu.RUnlock()
	lo, hi := q.Cursor.Bounds(0, 0)
	query := `SELECT id, parent_conv, parent_at, owner FROM conversations WHERE session=? AND deleted=0 AND id BETWEEN ? AND ?`
	if q.Parent == 0 && q.OwnedFrom == 0 && plant.On("sqlite-scan-lists-deleted") {
		query = strings.Replace(query, " AND deleted=0", "", 1)
	}
	args := []any{s.session, int64(lo), int64(hi)}
	if q.Parent != 0 {
		query += ` AND parent_conv=?`
		args = append(args, int64(q.Parent))
	}
	if q.OwnedFrom != 0 {
		query += ` AND owner IN (SELECT id FROM tasks WHERE session=? AND conv=?)`
		args = append(args, s.session, int64(q.OwnedFrom))
	}
	query += ` ORDER BY id` + order(q.Backward()) + ` LIMIT ?`
	args = append(args, q.Limit+1)
	items, err := queryAll(ctx, s.db, scanConv, query, args...)
	if err != nil {
		return storage.Page[storage.Conversation]{}, err
	}
	return storage.NewPage(q.Cursor, s.lastSeq, items, func(c storage.Conversation) ID { return c.ID }), nil
}

// GetEntries returns full entries by id.
func (s *Store) GetEntries(ctx context.Context, ids []ID) (map[ID]*storage.Entry, error) {
	if err := s.rlock(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out := make(map[ID]*storage.Entry, len(ids))
	for chunk := range slices.Chunk(ids, 500) {
		items, err := queryAll(ctx, s.db, scanEntry, `SELECT `+entryCols+` FROM entries WHERE session=? AND id IN (`+placeholders(len(chunk))+`)`,
			append([]any{s.session}, idArgs(chunk)...)...)
		if err != nil {
			return nil, err
		}
		for _, e := range items {
			out[e.ID] = e
		}
	}
	return out, nil
}

// ScanEntries reads a page of the logical transcript.
func (s *Store) ScanEntries(ctx context.Context, q storage.EntryQuery) (storage.Page[*storage.Entry], error) {
	q.Cursor = q.Cursor.Defaulted()
	if err := storage.CheckCursor(q.Cursor); err != nil {
		return storage.Page[*storage.Entry]{}, err
	}
	if err := s.rlock(); err != nil {
		return storage.Page[*storage.Entry]{}, err
	}
	defer s.mu.RUnlock()
	r := s.rd()
	if err := r.conversationExists(ctx, q.ConversationID); err != nil {
		return storage.Page[*storage.Entry]{}, err
	}
	levels, err := r.chain(ctx, q.ConversationID, 0)
	if err != nil {
		return storage.Page[*storage.Entry]{}, err
	}
	segs := make([]segment, len(levels))
	for i, l := range levels {
		segs[len(levels)-1-i] = segment{conv: l.conv, lo: 1, cap: l.cap}
	}
	through := q.Through
	if plant.On("sqlite-scan-ignores-through") {
		through = 0
	}
	lo, hi := q.Cursor.Bounds(q.From, through)
	items, err := span(segs, lo, hi, q.Backward(), q.Limit+1, func(sg segment, lo, hi ID, backward bool, n int) ([]*storage.Entry, error) {
		query, args := entryQuery(s.session, q, sg.conv, lo, hi, backward, n)
		return queryAll(ctx, s.db, scanEntry, query, args...)
	})
	if err != nil {
		return storage.Page[*storage.Entry]{}, err
	}
	return storage.NewPage(q.Cursor, s.lastSeq, items, func(e *storage.Entry) ID { return e.ID }), nil
}

// entryQuery is ScanEntries's statement for one conversation's segment:
// entries of conv with ids from lo to hi, at most n, in id order (backward
// or not).
func entryQuery(session string, q storage.EntryQuery, conv, lo, hi ID, backward bool, n int) (query string, args []any) {
	query = `SELECT ` + entryCols + ` FROM entries WHERE session=? AND conv=?`
	args = []any{session, int64(conv)}
	if q.Kind != "" {
		query += ` AND kind=?`
		args = append(args, q.Kind)
	}
	if q.Key != "" {
		// The keyed index's own term, for the planner to see it applies.
		query += ` AND key=? AND key != ''`
		args = append(args, q.Key)
	}
	query += ` AND id BETWEEN ? AND ? ORDER BY id` + order(backward) + ` LIMIT ?`
	return query, append(args, int64(lo), int64(hi), n)
}

// NewestHead returns the newest visible head at or before at.
func (s *Store) NewestHead(ctx context.Context, conversationID, at ID) (*storage.Entry, bool, error) {
	if err := s.rlock(); err != nil {
		return nil, false, err
	}
	defer s.mu.RUnlock()
	if at < 0 {
		return nil, false, fmt.Errorf("%w: negative position %d", storage.ErrBadQuery, at)
	}
	r := s.rd()
	if err := r.conversationExists(ctx, conversationID); err != nil {
		return nil, false, err
	}
	levels, err := r.chain(ctx, conversationID, at)
	if err != nil {
		return nil, false, err
	}
	for _, l := range levels {
		if plant.On("sqlite-head-uncapped") {
			l.cap = math.MaxInt64
		}
		e, err := scanEntry(s.db.QueryRowContext(ctx, `SELECT `+entryCols+` FROM entries WHERE session=? AND conv=? AND head IS NOT NULL AND id<=? ORDER BY id DESC LIMIT 1`,
			s.session, int64(l.conv), int64(l.cap)))
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		return e, true, nil
	}
	return nil, false, nil
}

// EntryKinds returns the distinct entry kinds written, sorted.
func (s *Store) EntryKinds(ctx context.Context) ([]string, error) {
	if err := s.rlock(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out, err := queryAll(ctx, s.db, func(sc interface{ Scan(...any) error }) (string, error) {
		var k string
		err := sc.Scan(&k)
		return k, err
	}, `SELECT kind FROM entry_kinds WHERE session=?`, s.session)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return out, nil
}

// GetTasks returns the named tasks, terminal ones included.
func (s *Store) GetTasks(ctx context.Context, ids []ID) (map[ID]*storage.Task, error) {
	if err := s.rlock(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out := make(map[ID]*storage.Task, len(ids))
	for chunk := range slices.Chunk(ids, 500) {
		items, err := queryAll(ctx, s.db, scanTask, `SELECT `+taskCols+` FROM tasks WHERE session=? AND id IN (`+placeholders(len(chunk))+`)`,
			append([]any{s.session}, idArgs(chunk)...)...)
		if err != nil {
			return nil, err
		}
		for _, t := range items {
			out[t.ID] = t
		}
	}
	return out, nil
}

// ScanTasks pages through tasks.
func (s *Store) ScanTasks(ctx context.Context, q storage.TaskQuery) (storage.Page[*storage.Task], error) {
	q.Cursor = q.Cursor.Defaulted()
	if err := storage.CheckTaskQuery(q); err != nil {
		return storage.Page[*storage.Task]{}, err
	}
	if err := s.rlock(); err != nil {
		return storage.Page[*storage.Task]{}, err
	}
	defer s.mu.RUnlock()
	query, args := taskQuery(s.session, q)
	items, err := queryAll(ctx, s.db, scanTask, query, args...)
	if err != nil {
		return storage.Page[*storage.Task]{}, err
	}
	return storage.NewPage(q.Cursor, s.lastSeq, items, func(t *storage.Task) ID { return t.ID }), nil
}

// taskQuery is ScanTasks's statement for a checked query with its cursor
// defaulted.
func taskQuery(session string, q storage.TaskQuery) (query string, args []any) {
	lo, hi := q.Cursor.Bounds(0, 0)
	query = `SELECT ` + taskCols + ` FROM tasks WHERE session=? AND id BETWEEN ? AND ?`
	args = []any{session, int64(lo), int64(hi)}
	// A query of live tasks reads the live index (tasks_live), and visits
	// no terminal row: the index's own term is in the query, for the
	// planner to see it applies, and a conversation filter is an
	// expression (+conv), for the planner not to prefer tasks_conv, which
	// holds every task.
	live := q.Live != nil && *q.Live || q.Live == nil && (q.Role == storage.RoleStart || q.Role == storage.RoleInflight)
	if len(q.ConversationIDs) > 0 {
		conv := ` AND conv IN (`
		if live {
			conv = ` AND +conv IN (`
		}
		query += conv + placeholders(len(q.ConversationIDs)) + `)`
		args = append(args, idArgs(q.ConversationIDs)...)
	}
	if live && plant.On("sqlite-live-tasks-any-session") {
		query = strings.Replace(query, `session=?`, `(session=? OR 1)`, 1)
	}
	switch {
	case live:
		query += ` AND role IN ('start','inflight')`
	case q.Live != nil:
		query += ` AND role = 'terminal'`
	}
	if q.Role != "" {
		query += ` AND role=?`
		args = append(args, string(q.Role))
	}
	if q.Kind != "" {
		query += ` AND kind=?`
		args = append(args, q.Kind)
	}
	if q.Abort != nil {
		query += ` AND abort=?`
		args = append(args, b2i(*q.Abort))
	}
	query += ` ORDER BY id` + order(q.Backward()) + ` LIMIT ?`
	args = append(args, q.Limit+1)
	return query, args
}

func checkRead(a storage.Address, at ID) error {
	if err := a.Validate(); err != nil {
		return err
	}
	if at != 0 && !a.Historical() {
		return fmt.Errorf("%w: %s at %d", storage.ErrHistoricalRead, a, at)
	}
	if at < 0 {
		return fmt.Errorf("%w: negative position %d", storage.ErrBadQuery, at)
	}
	return nil
}

// storedPolicy reads conversation state under the policy it was written with.
func (r *reader) storedPolicy(ctx context.Context, a storage.Address) (storage.Address, error) {
	if a.Scope.Kind == storage.ScopeConversation {
		info, err := r.stateInfo(ctx, a.StateKey())
		if err != nil {
			return a, err
		}
		if info != nil {
			a.Rewind = info.rewind
		}
	}
	return a, nil
}

type version struct {
	seq     ID
	value   []byte
	deleted bool
}

// latest is the newest version of key at or below cap.
func (r *reader) latest(ctx context.Context, key string, cap ID) (version, bool, error) {
	if r.memo != nil {
		// The newest version answers any cap at or above it; none answers
		// every cap.
		if m, ok := recall(r, r.memo.latest, key); ok && (m == nil || m.seq <= cap) {
			if m == nil {
				return version{}, false, nil
			}
			return version{seq: m.seq, deleted: m.deleted, value: slices.Clone(m.value)}, true, nil
		}
	}
	var (
		v   version
		seq int64
		val sql.NullString
		del int
	)
	err := r.q.QueryRowContext(ctx, `SELECT seq, value, deleted FROM value_versions WHERE session=? AND state_key=? AND seq<=? ORDER BY seq DESC LIMIT 1`,
		r.session, key, int64(cap)).Scan(&seq, &val, &del)
	if errors.Is(err, sql.ErrNoRows) {
		if r.memo != nil && cap == maxID {
			remember(r, r.memo.latest, key, nil)
		}
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	v.seq, v.deleted = ID(seq), del != 0
	if val.Valid {
		if err := checkJSON("value_versions", v.seq, "value", val.String, false); err != nil {
			return v, false, err
		}
		v.value = []byte(val.String)
	}
	if r.memo != nil && cap == maxID && len(v.value) <= valueMemoMax {
		remember(r, r.memo.latest, key, &version{seq: v.seq, deleted: v.deleted, value: slices.Clone(v.value)})
	}
	return v, true, nil
}

// GetValue reads a value now or, for rewindable state, as of an entry.
func (s *Store) GetValue(ctx context.Context, a storage.Address, at ID) (storage.Version, bool, error) {
	if err := checkRead(a, at); err != nil {
		return storage.Version{}, false, err
	}
	if err := s.rlock(); err != nil {
		return storage.Version{}, false, err
	}
	defer s.mu.RUnlock()
	v, ok, err := s.rd().value(ctx, a, at)
	if err != nil || !ok {
		return storage.Version{}, false, err
	}
	return storage.Version{Seq: v.seq, Value: v.value}, true, nil
}

func (r *reader) value(ctx context.Context, a storage.Address, at ID) (version, bool, error) {
	a, err := r.storedPolicy(ctx, a)
	if err != nil {
		return version{}, false, err
	}
	if !a.Historical() {
		info, err := r.stateInfo(ctx, a.StateKey())
		if err != nil || info == nil || info.list {
			return version{}, false, err
		}
		v, ok, err := r.latest(ctx, a.StateKey(), maxID)
		if err != nil || !ok || v.deleted {
			return version{}, false, err
		}
		return v, true, nil
	}
	levels, err := r.chain(ctx, a.Scope.ID, at)
	if err != nil {
		return version{}, false, err
	}
	for _, l := range levels {
		b := a
		b.Scope.ID = l.conv
		info, err := r.stateInfo(ctx, b.StateKey())
		if err != nil {
			return version{}, false, err
		}
		if info == nil || info.list || !info.rewind {
			continue
		}
		v, ok, err := r.latest(ctx, b.StateKey(), l.cap)
		if err != nil {
			return version{}, false, err
		}
		if ok {
			return v, !v.deleted, nil
		}
	}
	return version{}, false, nil
}

// ScanValues pages through the current values of one namespace, by key.
func (s *Store) ScanValues(ctx context.Context, q storage.ValueQuery) (storage.Page[storage.KeyedVersion], error) {
	if q.Limit == 0 {
		q.Limit = storage.PageLimitDefault // as a zero Cursor
	}
	if q.Limit < 1 || q.Limit > storage.PageLimitMax {
		return storage.Page[storage.KeyedVersion]{}, fmt.Errorf("%w: limit %d outside 1..%d", storage.ErrBadQuery, q.Limit, storage.PageLimitMax)
	}
	if err := (storage.Address{Scope: q.Scope, Namespace: q.Namespace}).Validate(); err != nil {
		return storage.Page[storage.KeyedVersion]{}, err
	}
	if err := s.rlock(); err != nil {
		return storage.Page[storage.KeyedVersion]{}, err
	}
	defer s.mu.RUnlock()
	r := s.rd()
	scopes := []storage.Scope{q.Scope}
	if q.Scope.Kind == storage.ScopeConversation {
		levels, err := r.chain(ctx, q.Scope.ID, 0)
		if err != nil {
			return storage.Page[storage.KeyedVersion]{}, err
		}
		scopes = scopes[:0]
		for _, l := range levels {
			scopes = append(scopes, storage.Scope{Kind: storage.ScopeConversation, ID: l.conv})
		}
	}
	out := storage.Page[storage.KeyedVersion]{Items: []storage.KeyedVersion{}, ReadAt: s.lastSeq}
	if len(scopes) == 0 {
		return out, nil
	}
	args := []any{s.session, q.After}
	for _, sc := range scopes {
		args = append(args, nsKey(sc, q.Namespace))
	}
	keys, err := queryAll(ctx, s.db, func(sc interface{ Scan(...any) error }) (string, error) {
		var k string
		err := sc.Scan(&k)
		return k, err
	}, `SELECT DISTINCT key FROM values_index WHERE session=? AND key > ? AND scope_ns IN (`+placeholders(len(scopes))+`)`, args...)
	if err != nil {
		return storage.Page[storage.KeyedVersion]{}, err
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	for _, key := range keys {
		if key == "" || key <= q.After {
			continue
		}
		v, ok, err := r.currentValue(ctx, q.Scope, q.Namespace, key)
		if err != nil {
			return storage.Page[storage.KeyedVersion]{}, err
		}
		if !ok {
			continue
		}
		if len(out.Items) == q.Limit {
			out.Next = 1
			break
		}
		out.Items = append(out.Items, storage.KeyedVersion{Key: key, Version: storage.Version{Seq: v.seq, Value: v.value}})
	}
	return out, nil
}

func (r *reader) currentValue(ctx context.Context, scope storage.Scope, namespace, key string) (version, bool, error) {
	a := storage.Address{Scope: scope, Namespace: namespace, Key: key}
	info, err := r.stateInfo(ctx, a.StateKey())
	if err != nil {
		return version{}, false, err
	}
	if info != nil {
		a.Rewind = info.rewind
	} else {
		a.Rewind = scope.Kind == storage.ScopeConversation
	}
	return r.value(ctx, a, 0)
}

// ReadList reads a page of a list, now or as of an entry.
func (s *Store) ReadList(ctx context.Context, a storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	q.Cursor = q.Cursor.Defaulted()
	if err := storage.CheckCursor(q.Cursor); err != nil {
		return storage.Page[storage.Element]{}, err
	}
	if err := checkRead(a, q.At); err != nil {
		return storage.Page[storage.Element]{}, err
	}
	if err := s.rlock(); err != nil {
		return storage.Page[storage.Element]{}, err
	}
	defer s.mu.RUnlock()
	lo, hi := q.Cursor.Bounds(0, 0)
	items, _, err := s.rd().listElements(ctx, a, q.At, lo, hi, q.Backward(), q.Limit+1)
	if err != nil {
		return storage.Page[storage.Element]{}, err
	}
	return storage.NewPage(q.Cursor, s.lastSeq, items, func(e storage.Element) ID { return e.ID }), nil
}

func scanElement(sc interface{ Scan(...any) error }) (storage.Element, error) {
	var (
		id  int64
		val string
	)
	if err := sc.Scan(&id, &val); err != nil {
		return storage.Element{}, scanError("list_elements", err)
	}
	if err := checkJSON("list_elements", ID(id), "value", val, false); err != nil {
		return storage.Element{}, err
	}
	return storage.Element{ID: ID(id), Value: json.RawMessage(val)}, nil
}

// scanError wraps a failed row scan (a column of the wrong type) as a
// RowError; no-rows stays itself, since callers test for it.
func scanError(table string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return err
	}
	return &RowError{Table: table, Column: "(scan)", Err: err}
}

// listElements returns up to n visible elements of a list within [lo, hi]
// in walk order, combining fork levels exactly like the memory backend.
func (r *reader) listElements(ctx context.Context, a storage.Address, at, lo, hi ID, backward bool, n int) ([]storage.Element, bool, error) {
	a, err := r.storedPolicy(ctx, a)
	if err != nil {
		return nil, false, err
	}
	if !a.Historical() {
		info, err := r.stateInfo(ctx, a.StateKey())
		if err != nil || info == nil || !info.list {
			return nil, false, err
		}
		segs := []segment{{key: a.StateKey(), lo: 1, cap: maxID}}
		items, err := span(segs, lo, hi, backward, n, func(sg segment, lo, hi ID, backward bool, n int) ([]storage.Element, error) {
			return queryAll(ctx, r.q, scanElement, `SELECT id, value FROM list_elements WHERE session=? AND state_key=? AND id BETWEEN ? AND ? ORDER BY id`+order(backward && !plant.On("sqlite-list-backward-oldest"))+` LIMIT ?`,
				r.session, sg.key, int64(lo), int64(hi), n)
		})
		return items, false, err
	}
	levels, err := r.chain(ctx, a.Scope.ID, at)
	if err != nil {
		return nil, false, err
	}
	var (
		segs     []segment
		removals []segment // key and cap of each level whose removes apply
	)
	for _, l := range levels {
		b := a
		b.Scope.ID = l.conv
		key := b.StateKey()
		info, err := r.stateInfo(ctx, key)
		if err != nil {
			return nil, false, err
		}
		if info == nil || !info.list || !info.rewind {
			continue
		}
		removals = append(removals, segment{key: key, cap: l.cap})
		floor := ID(1)
		var clear sql.NullInt64
		if err := r.q.QueryRowContext(ctx, `SELECT MAX(seq) FROM list_clears WHERE session=? AND state_key=? AND seq<=?`,
			r.session, key, int64(l.cap)).Scan(&clear); err != nil {
			return nil, false, err
		}
		if clear.Valid {
			floor = ID(clear.Int64) + 1
		}
		segs = append(segs, segment{key: key, lo: floor, cap: l.cap})
		if floor > 1 && !plant.On("sqlite-clear-spares-inherited") {
			break
		}
	}
	slices.Reverse(segs)
	var removeCond strings.Builder
	var removeArgs []any
	for i, rm := range removals {
		if i > 0 {
			removeCond.WriteString(" OR ")
		}
		removeCond.WriteString("(r.state_key=? AND r.seq<=?)")
		removeArgs = append(removeArgs, rm.key, int64(rm.cap))
	}
	items, err := span(segs, lo, hi, backward, n, func(sg segment, lo, hi ID, backward bool, n int) ([]storage.Element, error) {
		args := []any{r.session, sg.key, int64(lo), int64(hi), r.session}
		args = append(args, removeArgs...)
		args = append(args, n)
		return queryAll(ctx, r.q, scanElement, `SELECT e.id, e.value FROM list_elements e WHERE e.session=? AND e.state_key=? AND e.id BETWEEN ? AND ?
			AND NOT EXISTS (SELECT 1 FROM list_removes r WHERE r.session=? AND r.element=e.id AND (`+removeCond.String()+`))
			ORDER BY e.id`+order(backward)+` LIMIT ?`, args...)
	})
	return items, false, err
}
