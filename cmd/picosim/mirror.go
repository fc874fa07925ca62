package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// The three backends give identical answers (DESIGN §1): a run on JSONL or
// SQLite is held to it read by read. Its handle is mirrored by a memory
// store that gets every batch the disk backend acknowledged; each read is
// asked of both, and the first answer that differs breaks the rule
// backends-agree, naming the read, its arguments and both answers. A
// restarted process's mirror is the batches its files reopened with,
// committed afresh to a new memory store; the session's files, opened cold
// at the end, are held whole to one (mirrorDiff).

// ruleBackendsAgree: the disk backend answers every read as the memory
// backend given the same batches does.
const ruleBackendsAgree oracleRule = "backends-agree"

// mirrorLog is what the mirrors of a run share: the batches the disk
// backend acknowledged, in order, and the one a failed commit may have
// left on disk.
type mirrorLog struct {
	batches   []storage.CommitBatch
	last      storage.ID // the sequence the batches end at
	uncertain *storage.CommitBatch
}

// rebuild commits the logged batches through last to a new memory store:
// what a backend reopened at last holds. It is false when last does not
// fall where a batch ends (the restart lost or kept part of a batch, which
// the acknowledged-entries check names), and the store is then not a mirror.
func (l *mirrorLog) rebuild(ctx context.Context, last storage.ID) (*memory.Store, bool) {
	if l.uncertain != nil && last == l.last+storage.ID(len(l.uncertain.Writes)) {
		l.batches, l.last = append(l.batches, *l.uncertain), last // it landed
	}
	l.uncertain = nil
	m := memory.New()
	kept := 0
	for _, b := range l.batches {
		if m.LastSeq() >= last {
			break
		}
		if _, err := m.Commit(ctx, b); err != nil {
			break
		}
		kept++
	}
	// The log goes on from what the files hold; batches a restart lost
	// are not the next process's history.
	l.batches, l.last = l.batches[:kept], m.LastSeq()
	return m, m.LastSeq() == last
}

// mirrored is a disk backend's handle with its memory mirror. A commit the
// handle failed leaves the mirror unsure until a restart rebuilds it (one
// it refused whole, the mirror must refuse too and goes on), as
// does a read the handle failed or one whose context ended (Go's SQL layer
// refuses those; memory answers them).
type mirrored struct {
	storage.Storage
	mem    *memory.Store // nil: not comparing
	log    *mirrorLog
	oracle *oracle
}

func (m *mirrored) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	r, err := m.Storage.Commit(ctx, b)
	if m.mem == nil {
		return r, err
	}
	if rejected(m.Storage, m.log, err) {
		// Nothing landed; the mirror must refuse the batch too.
		if _, merr := m.mem.Commit(ctx, b); merr == nil {
			m.disagree("Commit", b.Task, err.Error(), "accepted")
		}
		return r, err
	}
	if err != nil {
		m.log.uncertain, m.mem = &b, nil
		return r, err
	}
	mr, merr := m.mem.Commit(ctx, b)
	switch {
	case merr != nil:
		m.disagree("Commit", b.Task, fmt.Sprintf("range %v", r), merr.Error())
	case mr != r:
		m.disagree("Commit", b.Task, fmt.Sprintf("range %v", r), fmt.Sprintf("range %v", mr))
	}
	if len(b.Writes) > 0 {
		m.log.batches, m.log.last = append(m.log.batches, b), r.Last
	}
	return r, err
}

// mirror is a disk backend's handle mirrored by the batches its files
// opened with (none for a new session), for a process of the run.
func mirror(ctx context.Context, handle storage.Storage, log *mirrorLog, o *oracle) *mirrored {
	m := &mirrored{Storage: handle, log: log, oracle: o}
	if mem, ok := log.rebuild(ctx, handle.LastSeq()); ok {
		m.mem = mem
	}
	return m
}

// logged is a memory backend's handle that logs the batches it
// acknowledged, as a mirror does, for the rules that derive what a
// session holds from its batches (storeReads). A failed commit leaves its
// batch uncertain, and a log a restart could not rebuild stops growing.
type logged struct {
	storage.Storage
	log *mirrorLog
	on  bool
}

func (l *logged) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	r, err := l.Storage.Commit(ctx, b)
	switch {
	case !l.on || rejected(l.Storage, l.log, err):
	case err != nil:
		l.log.uncertain, l.on = &b, false
	case len(b.Writes) > 0:
		l.log.batches, l.log.last = append(l.log.batches, b), r.Last
	}
	return r, err
}

// rejected is whether err is a batch the store refused whole (a
// storage.BatchError, its sequence where the log ends): nothing of it
// landed, and the log goes on without it.
func rejected(store storage.Storage, log *mirrorLog, err error) bool {
	var be *storage.BatchError
	return errors.As(err, &be) && store.LastSeq() == log.last
}

// logging is a memory backend's handle logging into log, which it first
// brings to the batches the handle holds (none for a new session).
func logging(ctx context.Context, handle storage.Storage, log *mirrorLog) *logged {
	_, ok := log.rebuild(ctx, handle.LastSeq())
	return &logged{Storage: handle, log: log, on: ok}
}

// edgeQueries asks store reads at the edges of their cursors: a zero
// cursor (the default page), limits past the maximum or below one, a
// start past every id. A mirrored store holds each answer, or refusal, to
// memory's (compare); the answers themselves are not looked at here.
func edgeQueries(ctx context.Context, store storage.Storage) {
	cursors := []storage.Cursor{{}, {Limit: storage.PageLimitMax + 1}, {Limit: -1}, {Limit: 1, After: 1 << 40}}
	for _, c := range cursors {
		_, _ = store.ScanEntries(ctx, storage.EntryQuery{Cursor: c, ConversationID: root})
		_, _ = store.ScanTasks(ctx, storage.TaskQuery{Cursor: c})
		_, _ = store.ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
		// Lists and namespaces most runs fill: every answer's usage, every
		// input's result.
		_, _ = store.ReadList(ctx, agent.UsageList.Address, storage.ListQuery{Cursor: c})
		_, _ = store.ReadList(ctx, agent.InboxList.In(root).Address, storage.ListQuery{Cursor: c})
		_, _ = store.ScanValues(ctx, storage.ValueQuery{Scope: storage.ConversationScope(root), Namespace: agent.InputResultValue.Namespace, Limit: c.Limit})
	}
}

// disagree breaks the rule once; the mirror stops comparing.
func (m *mirrored) disagree(read string, args any, disk, mem any) {
	what, ok := args.(string)
	if !ok {
		raw, _ := json.Marshal(args) // not %v: a query's *bool would print as an address
		what = string(raw)
	}
	_ = m.oracle.fail(broke(ruleBackendsAgree, "%s(%s) on the disk backend differs from memory given the same batches: %s", read, what, answerDiff(mem, disk)))
	m.mem = nil
}

// answerDiff shows where two answers first differ, as JSON (deterministic,
// unlike cmp.Diff's text): a window of each around the first differing byte.
func answerDiff(mem, disk any) string {
	a, _ := json.Marshal(mem)
	b, _ := json.Marshal(disk)
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	window := func(s []byte) string {
		lo, hi := max(0, i-diffContext), min(len(s), i+diffContext)
		w := string(s[lo:hi])
		if lo > 0 {
			w = "…" + w
		}
		if hi < len(s) {
			w += "…"
		}
		return w
	}
	return fmt.Sprintf("at byte %d, memory %s, disk %s", i, window(a), window(b))
}

// diffContext is how much of each answer answerDiff shows either side of
// where they part.
const diffContext = 80

// mirrorCmp compares answers: nil and empty are the same answer.
var mirrorCmp = []cmp.Option{cmpopts.EquateEmpty()}

// compare holds one read's two answers to each other.
func compare[T any](ctx context.Context, m *mirrored, read string, args any, disk T, diskErr error, ask func(*memory.Store) (T, error)) {
	refused := errors.Is(diskErr, storage.ErrBadQuery)
	if m.mem == nil || diskErr != nil && !refused || ctx.Err() != nil {
		return
	}
	mem, err := ask(m.mem)
	switch {
	case refused && !errors.Is(err, storage.ErrBadQuery):
		// A query the disk refuses as bad, memory must refuse alike.
		var answer any = mem
		if err != nil {
			answer = err.Error()
		}
		m.disagree(read, args, diskErr.Error(), answer)
	case refused:
	case err != nil:
		m.disagree(read, args, disk, err.Error())
	case !reflect.DeepEqual(mem, disk) && !cmp.Equal(mem, disk, mirrorCmp...): // cmp is slow; most answers are deeply equal
		m.disagree(read, args, disk, mem)
	}
}

func (m *mirrored) LastSeq() storage.ID {
	last := m.Storage.LastSeq()
	if m.mem != nil && m.mem.LastSeq() != last {
		m.disagree("LastSeq", "", last, m.mem.LastSeq())
	}
	return last
}

func (m *mirrored) GetConversations(ctx context.Context, ids []storage.ID) (map[storage.ID]storage.Conversation, error) {
	got, err := m.Storage.GetConversations(ctx, ids)
	compare(ctx, m, "GetConversations", ids, got, err, func(s *memory.Store) (map[storage.ID]storage.Conversation, error) {
		return s.GetConversations(ctx, ids)
	})
	return got, err
}

func (m *mirrored) ScanConversations(ctx context.Context, q storage.ConversationQuery) (storage.Page[storage.Conversation], error) {
	got, err := m.Storage.ScanConversations(ctx, q)
	compare(ctx, m, "ScanConversations", q, got, err, func(s *memory.Store) (storage.Page[storage.Conversation], error) {
		return s.ScanConversations(ctx, q)
	})
	return got, err
}

func (m *mirrored) GetEntries(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Entry, error) {
	got, err := m.Storage.GetEntries(ctx, ids)
	compare(ctx, m, "GetEntries", ids, got, err, func(s *memory.Store) (map[storage.ID]*storage.Entry, error) {
		return s.GetEntries(ctx, ids)
	})
	return got, err
}

func (m *mirrored) ScanEntries(ctx context.Context, q storage.EntryQuery) (storage.Page[*storage.Entry], error) {
	got, err := m.Storage.ScanEntries(ctx, q)
	compare(ctx, m, "ScanEntries", q, got, err, func(s *memory.Store) (storage.Page[*storage.Entry], error) {
		return s.ScanEntries(ctx, q)
	})
	return got, err
}

// head is NewestHead's answer as one value.
type head struct {
	Entry *storage.Entry
	Found bool
}

func (m *mirrored) NewestHead(ctx context.Context, conv, at storage.ID) (*storage.Entry, bool, error) {
	e, ok, err := m.Storage.NewestHead(ctx, conv, at)
	compare(ctx, m, "NewestHead", [2]storage.ID{conv, at}, head{e, ok}, err, func(s *memory.Store) (head, error) {
		e, ok, err := s.NewestHead(ctx, conv, at)
		return head{e, ok}, err
	})
	return e, ok, err
}

func (m *mirrored) EntryKinds(ctx context.Context) ([]string, error) {
	got, err := m.Storage.EntryKinds(ctx)
	compare(ctx, m, "EntryKinds", "", got, err, func(s *memory.Store) ([]string, error) { return s.EntryKinds(ctx) })
	return got, err
}

func (m *mirrored) GetTasks(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Task, error) {
	got, err := m.Storage.GetTasks(ctx, ids)
	compare(ctx, m, "GetTasks", ids, got, err, func(s *memory.Store) (map[storage.ID]*storage.Task, error) {
		return s.GetTasks(ctx, ids)
	})
	return got, err
}

func (m *mirrored) ScanTasks(ctx context.Context, q storage.TaskQuery) (storage.Page[*storage.Task], error) {
	got, err := m.Storage.ScanTasks(ctx, q)
	compare(ctx, m, "ScanTasks", q, got, err, func(s *memory.Store) (storage.Page[*storage.Task], error) {
		return s.ScanTasks(ctx, q)
	})
	return got, err
}

// version is GetValue's answer as one value.
type version struct {
	Version storage.Version
	Found   bool
}

func (m *mirrored) GetValue(ctx context.Context, addr storage.Address, at storage.ID) (storage.Version, bool, error) {
	v, ok, err := m.Storage.GetValue(ctx, addr, at)
	compare(ctx, m, "GetValue", fmt.Sprintf("%s at %d", addr, at), version{v, ok}, err, func(s *memory.Store) (version, error) {
		v, ok, err := s.GetValue(ctx, addr, at)
		return version{v, ok}, err
	})
	return v, ok, err
}

func (m *mirrored) ScanValues(ctx context.Context, q storage.ValueQuery) (storage.Page[storage.KeyedVersion], error) {
	got, err := m.Storage.ScanValues(ctx, q)
	compare(ctx, m, "ScanValues", q, got, err, func(s *memory.Store) (storage.Page[storage.KeyedVersion], error) {
		return s.ScanValues(ctx, q)
	})
	return got, err
}

func (m *mirrored) ReadList(ctx context.Context, addr storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	got, err := m.Storage.ReadList(ctx, addr, q)
	compare(ctx, m, "ReadList", fmt.Sprintf("%s %+v", addr, q), got, err, func(s *memory.Store) (storage.Page[storage.Element], error) {
		return s.ReadList(ctx, addr, q)
	})
	return got, err
}

// mirrorDiff holds a store to the memory store given the same batches,
// whole: every conversation with its forks and children, its logical
// transcript (paged both ways, by each kind and key it holds, and within a
// window) and its newest heads, every task (by liveness, role, kind and
// abort mark, paged both ways), the entry kinds, and every value and list
// the batches wrote, at their historical positions too, each namespace's
// scan included. The queries reach what the harness's own reads may not. It
// returns the first difference, or "".
func mirrorDiff(ctx context.Context, disk storage.Storage, log *mirrorLog) string {
	mem, ok := log.rebuild(ctx, disk.LastSeq())
	if !ok {
		return "" // the acknowledged-entries check names a lost batch
	}
	m := &mirrored{Storage: disk, mem: mem, log: log, oracle: newOracle()}
	sw := mirrorSweep{ctx: ctx, m: m}
	convs := sw.convs(storage.ConversationQuery{})
	var tasks []storage.ID
	kinds, roles := map[string]bool{}, map[storage.TaskRole]bool{}
	for _, t := range sw.tasks(storage.TaskQuery{}) {
		tasks = append(tasks, t.ID)
		kinds[t.Kind], roles[t.Role] = true, true
	}
	positions := map[storage.ID][]storage.ID{} // conversation → entry ids to read state at
	var entries []storage.ID
	for _, c := range convs {
		sw.convs(storage.ConversationQuery{Parent: c.ID})
		sw.convs(storage.ConversationQuery{OwnedFrom: c.ID})
		all := sw.entries(storage.EntryQuery{ConversationID: c.ID})
		sw.entries(storage.EntryQuery{ConversationID: c.ID}, sweepPage)
		sw.read(func() error {
			_, err := m.ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Before: storage.ID(1) << 62, Limit: sweepPage}, ConversationID: c.ID})
			return err
		})
		entryKinds, keys := map[string]bool{}, map[string]bool{}
		for i, e := range all {
			entries = append(entries, e.ID)
			if !entryKinds[e.Kind] {
				entryKinds[e.Kind] = true
				sw.entries(storage.EntryQuery{ConversationID: c.ID, Kind: e.Kind})
			}
			if e.Key != "" && !keys[e.Key] {
				keys[e.Key] = true
				sw.entries(storage.EntryQuery{ConversationID: c.ID, Key: e.Key})
			}
			if e.Head != 0 || i == len(all)/2 || i == len(all)-1 {
				positions[c.ID] = append(positions[c.ID], e.ID)
			}
		}
		if n := len(all); n > 2 {
			sw.entries(storage.EntryQuery{ConversationID: c.ID, From: all[n/3].ID, Through: all[2*n/3].ID})
		}
		positions[c.ID] = sweepPositions(positions[c.ID])
		for _, at := range append([]storage.ID{0}, positions[c.ID]...) {
			sw.read(func() error { _, _, err := m.NewestHead(ctx, c.ID, at); return err })
		}
		for _, live := range []bool{true, false} {
			sw.tasks(storage.TaskQuery{ConversationIDs: []storage.ID{c.ID}, Live: storage.Bool(live)})
		}
	}
	for _, live := range []bool{true, false} {
		sw.tasks(storage.TaskQuery{Live: storage.Bool(live)})
		sw.tasks(storage.TaskQuery{Abort: storage.Bool(live)})
	}
	for _, role := range sortedKeys(roles) {
		sw.tasks(storage.TaskQuery{Role: role})
	}
	for _, kind := range sortedKeys(kinds) {
		sw.tasks(storage.TaskQuery{Kind: kind})
	}
	sw.tasks(storage.TaskQuery{}, sweepPage)
	sw.read(func() error {
		_, err := m.ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Before: storage.ID(1) << 62, Limit: sweepPage}})
		return err
	})
	missing := disk.LastSeq() + 1
	sw.read(func() error { _, err := m.GetTasks(ctx, append(tasks, missing)); return err })
	sw.read(func() error { _, err := m.GetEntries(ctx, append(entries, missing)); return err })
	sw.read(func() error {
		ids := []storage.ID{missing}
		for _, c := range convs {
			ids = append(ids, c.ID)
		}
		_, err := m.GetConversations(ctx, ids)
		return err
	})
	sw.read(func() error { _, err := m.EntryKinds(ctx); return err })
	namespaces := map[storage.Address]bool{} // a scope and namespace, scanned once
	for _, w := range writtenAddresses(log.batches) {
		addr := w.addr
		ats := []storage.ID{0}
		if addr.Historical() {
			ats = append(ats, positions[addr.Scope.ID]...)
		}
		for _, at := range ats {
			if !w.list {
				sw.read(func() error { _, _, err := m.GetValue(ctx, addr, at); return err })
				continue
			}
			limits := []int{storage.PageLimitMax} // small pages at the current position only
			if at == 0 {
				limits = append(limits, sweepPage)
			}
			for _, limit := range limits {
				sw.read(func() error {
					_, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Element], error) {
						c.Limit = limit
						return m.ReadList(ctx, addr, storage.ListQuery{Cursor: c, At: at})
					})
					return err
				})
			}
		}
		ns := storage.Address{Scope: addr.Scope, Namespace: addr.Namespace}
		if w.list || namespaces[ns] {
			continue
		}
		namespaces[ns] = true
		for _, limit := range []int{storage.PageLimitMax, 1} {
			sw.read(func() error {
				q := storage.ValueQuery{Scope: addr.Scope, Namespace: addr.Namespace, Limit: limit}
				for {
					p, err := m.ScanValues(ctx, q)
					if err != nil || p.Next == 0 || len(p.Items) == 0 {
						return err
					}
					q.After = p.Items[len(p.Items)-1].Key
				}
			})
		}
	}
	if m.oracle.first != nil {
		return m.oracle.first.Error()
	}
	return ""
}

// sweepPage is the small page the sweep also reads in, so that paging
// itself is compared.
const sweepPage = 2

// sweepPositionsMax bounds the entry positions a conversation's historical
// reads are compared at.
const sweepPositionsMax = 6

// sweepPositions keeps at most sweepPositionsMax of ids, spread over them.
func sweepPositions(ids []storage.ID) []storage.ID {
	if len(ids) <= sweepPositionsMax {
		return ids
	}
	out := make([]storage.ID, 0, sweepPositionsMax)
	for i := range sweepPositionsMax {
		out = append(out, ids[i*(len(ids)-1)/(sweepPositionsMax-1)])
	}
	return out
}

// mirrorSweep runs mirrorDiff's reads through the mirror until one differs.
type mirrorSweep struct {
	ctx context.Context
	m   *mirrored
}

// read runs fn unless an answer differed already; a read the disk backend
// fails is not compared (the mirror skips it), and the sweep goes on.
func (sw mirrorSweep) read(fn func() error) {
	if sw.m.oracle.first == nil {
		_ = fn()
	}
}

// convs, entries and tasks read every page of a scan, Limit items a page
// (the backend's largest unless given), and return what they read.
func (sw mirrorSweep) convs(q storage.ConversationQuery, limit ...int) (out []storage.Conversation) {
	sw.read(func() (err error) {
		out, err = storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
			q.Cursor = pageCursor(c, limit)
			return sw.m.ScanConversations(sw.ctx, q)
		})
		return err
	})
	return out
}

func (sw mirrorSweep) entries(q storage.EntryQuery, limit ...int) (out []*storage.Entry) {
	sw.read(func() (err error) {
		out, err = storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Entry], error) {
			q.Cursor = pageCursor(c, limit)
			return sw.m.ScanEntries(sw.ctx, q)
		})
		return err
	})
	return out
}

func (sw mirrorSweep) tasks(q storage.TaskQuery, limit ...int) (out []*storage.Task) {
	sw.read(func() (err error) {
		out, err = storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Task], error) {
			q.Cursor = pageCursor(c, limit)
			return sw.m.ScanTasks(sw.ctx, q)
		})
		return err
	})
	return out
}

// pageCursor is c with the page size limit gives, if it gives one.
func pageCursor(c storage.Cursor, limit []int) storage.Cursor {
	if len(limit) > 0 {
		c.Limit = limit[0]
	}
	return c
}

// sortedKeys are m's keys in order.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// written is an address a batch wrote, and whether it is a list's.
type written struct {
	addr storage.Address
	list bool
}

// writtenAddresses are the distinct addresses the batches' state writes
// name, in the order first written.
func writtenAddresses(batches []storage.CommitBatch) []written {
	seen := map[storage.Address]bool{}
	var out []written
	for _, b := range batches {
		for _, w := range b.Writes {
			if w.Addr != nil && !seen[*w.Addr] {
				seen[*w.Addr] = true
				list := w.Type == storage.WriteListAppend || w.Type == storage.WriteListRemove || w.Type == storage.WriteListClear
				out = append(out, written{*w.Addr, list})
			}
		}
	}
	return out
}
