package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pico-go/pico/storage"
)

// The state rule (pico-v3.md §9.1 handles, storage's value and list
// reads), derived here on its own from the batches the session committed
// and held to what the store answers. A state is one (scope, namespace,
// key); its kind (value or list) and policy are its first write's. A read
// of session, scratch or sticky conversation state replays every write of
// it in sequence order: a value is its last set (a delete: none), a list
// the elements appended and neither removed nor cleared since. A read of
// rewindable conversation state at a position (0: now) replays only the
// visible writes: those of the conversation's own state through the
// position and, up its fork chain, of each source's same state through
// the fork point (and every lower cap), skipping a level whose state is
// sticky or of the other kind. Sticky state is never inherited; a settled
// task's scratch state is gone. Nothing here asks the store for a chain,
// a version or a cap: only the batches.

// ruleStateReads: every value, list and namespace scan reads as the state
// rule derives it from the committed batches.
const ruleStateReads oracleRule = "state-reads-by-the-rule"

// stateOp is one committed write of a state, at its sequence.
type stateOp struct {
	seq     storage.ID
	typ     storage.WriteType
	value   json.RawMessage
	element storage.ID
}

// ruleState is one state's kind, policy and writes.
type ruleState struct {
	addr storage.Address // as first written: its policy
	list bool
	ops  []stateOp
}

// stateModel is what the rule reads: the conversations (their fork
// links), the states, and the tasks that settled.
type stateModel struct {
	convs   map[storage.ID]*storage.Conversation
	deleted map[storage.ID]bool
	entries map[storage.ID][]*storage.Entry // by conversation, in id order
	states  map[storage.StateRef]*ruleState
	order   []storage.StateRef // in first-write order
	settled map[storage.ID]bool
}

func isListWrite(t storage.WriteType) bool {
	return t == storage.WriteListAppend || t == storage.WriteListRemove || t == storage.WriteListClear
}

// modelOf builds the model from a session's batches, which start at
// sequence 1 and end at last; false when they do not (a log that lost
// track of a restart), and there is then nothing to hold the store to.
func modelOf(batches []storage.CommitBatch, last storage.ID) (*stateModel, bool) {
	m := &stateModel{convs: map[storage.ID]*storage.Conversation{}, deleted: map[storage.ID]bool{}, entries: map[storage.ID][]*storage.Entry{},
		states: map[storage.StateRef]*ruleState{}, settled: map[storage.ID]bool{}}
	seq := storage.ID(0)
	for _, b := range batches {
		for _, w := range b.Writes {
			seq++
			switch {
			case w.Addr != nil:
				ref := w.Addr.Ref()
				st := m.states[ref]
				if st == nil {
					st = &ruleState{addr: *w.Addr, list: isListWrite(w.Type)}
					m.states[ref] = st
					m.order = append(m.order, ref)
				}
				st.ops = append(st.ops, stateOp{seq: seq, typ: w.Type, value: w.Value, element: w.Element})
			case w.Type == storage.WriteEntry && w.Entry != nil:
				m.entries[w.Entry.ConversationID] = append(m.entries[w.Entry.ConversationID], w.Entry)
			case w.Type == storage.WriteCreateConversation:
				c := *w.Conversation
				m.convs[c.ID] = &c
			case w.Type == storage.WriteDeleteConversation:
				m.deleted[w.ID] = true
			case w.Type == storage.WriteSettle:
				m.settled[w.ID] = true
			}
		}
	}
	return m, seq == last
}

// level is one conversation of a reader's fork chain and the last
// position of it the reader sees.
type ruleLevel struct {
	conv, cap storage.ID
}

// chain is conv's fork chain read at at (0: now), the reader first.
func (m *stateModel) chain(conv, at storage.ID) []ruleLevel {
	cap := at
	if cap <= 0 {
		cap = storage.ID(1) << 62
	}
	var out []ruleLevel
	for c := m.convs[conv]; c != nil; {
		out = append(out, ruleLevel{c.ID, cap})
		if c.Parent == nil {
			break
		}
		cap = min(cap, c.Parent.At)
		c = m.convs[c.Parent.ConversationID]
	}
	return out
}

// visible is the writes a read of ref's namespace and key, as a value or
// a list, sees: all of the state's own for anything but rewindable
// conversation state; for that, the visible writes of the chain's levels
// whose state is rewindable and of the same kind, in sequence order.
func (m *stateModel) visible(ref storage.StateRef, list bool, at storage.ID) []stateOp {
	st := m.states[ref]
	if ref.Scope.Kind != storage.ScopeConversation || st != nil && !st.addr.Rewind {
		if st == nil || st.list != list || ref.Scope.Kind == storage.ScopeScratch && m.settled[ref.Scope.ID] {
			return nil
		}
		return st.ops
	}
	var ops []stateOp
	for _, l := range m.chain(ref.Scope.ID, at) {
		lref := ref
		lref.Scope.ID = l.conv
		lst := m.states[lref]
		if lst == nil || lst.list != list || !lst.addr.Rewind {
			continue
		}
		for _, op := range lst.ops {
			if op.seq <= l.cap {
				ops = append(ops, op)
			}
		}
	}
	slices.SortFunc(ops, func(a, b stateOp) int { return int(a.seq - b.seq) })
	return ops
}

// valueOf replays a value's visible writes: the last set, or none.
func valueOf(ops []stateOp) (storage.Version, bool) {
	var v storage.Version
	ok := false
	for _, op := range ops {
		switch op.typ {
		case storage.WriteValueSet:
			v, ok = storage.Version{Seq: op.seq, Value: op.value}, true
		case storage.WriteValueDelete:
			v, ok = storage.Version{}, false
		}
	}
	return v, ok
}

// elementsOf replays a list's visible writes: what was appended and not
// removed or cleared since, in element order.
func elementsOf(ops []stateOp) []storage.Element {
	var out []storage.Element
	for _, op := range ops {
		switch op.typ {
		case storage.WriteListAppend:
			out = append(out, storage.Element{ID: op.seq, Value: op.value})
		case storage.WriteListRemove:
			out = slices.DeleteFunc(out, func(e storage.Element) bool { return e.ID == op.element })
		case storage.WriteListClear:
			out = nil
		}
	}
	return out
}

// descendants is conv and every conversation forked from it, at any depth.
func (m *stateModel) descendants(conv storage.ID) []storage.ID {
	var out []storage.ID
	for _, c := range m.convs {
		for l := c; l != nil; {
			if l.ID == conv {
				out = append(out, c.ID)
				break
			}
			if l.Parent == nil {
				break
			}
			l = m.convs[l.Parent.ConversationID]
		}
	}
	slices.Sort(out)
	return out
}

// statePositionsMax bounds the positions one read is held to the rule at.
const statePositionsMax = 12

// positions are where a reader's historical reads of ref's namespace and
// key change or may: now, each visible write's sequence and the one
// before it, and the fork points of the reader's chain.
func (m *stateModel) positions(ref storage.StateRef) []storage.ID {
	out := []storage.ID{0}
	for _, l := range m.chain(ref.Scope.ID, 0) {
		if c := m.convs[l.conv]; c.Parent != nil {
			out = append(out, c.Parent.At)
		}
		lref := ref
		lref.Scope.ID = l.conv
		if st := m.states[lref]; st != nil {
			for _, op := range st.ops {
				out = append(out, op.seq, op.seq-1)
			}
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > statePositionsMax {
		kept := make([]storage.ID, 0, statePositionsMax)
		for i := range statePositionsMax {
			kept = append(kept, out[i*(len(out)-1)/(statePositionsMax-1)])
		}
		out = slices.Compact(kept)
	}
	return out
}

// storeReads holds the store's value, list and namespace reads to the
// state rule, and its transcript scans to the transcript rule
// (transcriptrule.go), over the batches of log: every state written, and for a
// conversation's state every conversation forked from it too (which
// inherits rewindable state and must not see sticky), at the positions
// where what they see changes. It does nothing when log does not account
// for every sequence of the store.
func storeReads(ctx context.Context, store storage.Storage, log *mirrorLog) error {
	if log == nil {
		return nil
	}
	m, ok := modelOf(log.batches, store.LastSeq())
	if !ok || log.last != store.LastSeq() {
		return nil
	}
	scanned := map[storage.Address]bool{}
	for _, ref := range m.order {
		st := m.states[ref]
		readers := []storage.ID{ref.Scope.ID}
		if ref.Scope.Kind == storage.ScopeConversation {
			readers = m.descendants(ref.Scope.ID)
		}
		for _, reader := range readers {
			r := ref
			r.Scope.ID = reader
			if own := m.states[r]; reader != ref.Scope.ID && own != nil || m.deleted[reader] {
				continue // its own state is held to the rule as its own
			}
			addr := storage.Address{Scope: r.Scope, Namespace: r.Namespace, Key: r.Key, Rewind: st.addr.Rewind}
			ats := []storage.ID{0}
			if addr.Historical() {
				ats = m.positions(r)
			}
			for i, at := range ats {
				// Page by page now and at one position in the middle of
				// its history; whole at every other.
				paged := i == 0 || i == len(ats)/2
				if err := m.holdRead(ctx, store, addr, st.list, at, paged); err != nil {
					return err
				}
			}
			ns := storage.Address{Scope: r.Scope, Namespace: r.Namespace}
			if !scanned[ns] {
				scanned[ns] = true
				if err := m.holdScan(ctx, store, r.Scope, r.Namespace); err != nil {
					return err
				}
			}
		}
	}
	return m.holdTranscripts(ctx, store)
}

// holdRead holds one value or list read of addr at at to the rule, a
// list's page by page too when paged.
func (m *stateModel) holdRead(ctx context.Context, store storage.Storage, addr storage.Address, list bool, at storage.ID, paged bool) error {
	ops := m.visible(addr.Ref(), list, at)
	if !list {
		want, wantOK := valueOf(ops)
		got, gotOK, err := store.GetValue(ctx, addr, at)
		if err != nil {
			return broke(ruleStateReads, "GetValue(%s at %d) fails: %v", addr, at, err)
		}
		if wantOK != gotOK || wantOK && (want.Seq != got.Seq || !bytes.Equal(want.Value, got.Value)) {
			return broke(ruleStateReads, "GetValue(%s at %d) reads %s, the rule %s (visible writes: %s)", addr, at, showVersion(got, gotOK), showVersion(want, wantOK), showOps(ops))
		}
		return nil
	}
	want := elementsOf(ops)
	got, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Element], error) {
		return store.ReadList(ctx, addr, storage.ListQuery{Cursor: c, At: at})
	})
	if err != nil {
		return broke(ruleStateReads, "ReadList(%s at %d) fails: %v", addr, at, err)
	}
	if !sameElements(want, got) {
		return broke(ruleStateReads, "ReadList(%s at %d) reads %s, the rule %s (visible writes: %s)", addr, at, showElements(got), showElements(want), showOps(ops))
	}
	if !paged {
		return nil
	}
	return holdListPages(ctx, store, addr, at, want)
}

// pageLimit is the page size the rules read a list or a transcript in,
// page by page, forward, backward and inside a window, so that every
// boundary of a page falls between two items somewhere; pagesMax bounds
// how many pages a long one is read in (its pages grow instead).
const (
	pageLimit = 2
	pagesMax  = 8
)

// holdListPages holds a list's paged reads to want, its elements as the
// rule derives them (holdPages).
func holdListPages(ctx context.Context, store storage.Storage, addr storage.Address, at storage.ID, want []storage.Element) error {
	return holdPages(ruleStateReads, fmt.Sprintf("ReadList(%s at %d", addr, at), store.LastSeq(), want,
		func(c storage.Cursor) (storage.Page[storage.Element], error) {
			return store.ReadList(ctx, addr, storage.ListQuery{Cursor: c, At: at})
		}, func(e storage.Element) storage.ID { return e.ID }, sameElements, showElements)
}

// holdPages holds a scan's paged reads to want, what the rule derives it
// holds: read forward in pages of pageLimit (more in a long one, read in
// pagesMax pages or so) from the start, backward from
// past last (the session's last sequence), and between its first and
// last item, every page must be the next items in its direction, its
// Next zero exactly when no more remain. call names the read in a
// violation; its closing parenthesis is added.
func holdPages[T any](rule oracleRule, call string, last storage.ID, want []T, read func(storage.Cursor) (storage.Page[T], error),
	id func(T) storage.ID, same func(a, b []T) bool, show func([]T) string) error {
	type scan struct {
		name  string
		start storage.Cursor
		want  []T
	}
	limit := max(pageLimit, len(want)/pagesMax)
	scans := []scan{
		{"forward", storage.Cursor{Limit: limit}, want},
		{"backward", storage.Cursor{Before: last + 1, Limit: limit}, want},
	}
	if len(want) >= 2 {
		scans = append(scans, scan{"inside", storage.Cursor{After: id(want[0]), Before: id(want[len(want)-1]), Limit: limit}, want[1 : len(want)-1]})
	}
	for _, sc := range scans {
		backward := sc.start.Backward()
		rest := slices.Clone(sc.want)
		for c := sc.start; ; {
			p, err := read(c)
			if err != nil {
				return broke(rule, "%s, %s from %+v) fails: %v", call, sc.name, c, err)
			}
			var next []T
			if backward {
				next, rest = rest[max(len(rest)-limit, 0):], rest[:max(len(rest)-limit, 0)]
			} else {
				next, rest = rest[:min(limit, len(rest))], rest[min(limit, len(rest)):]
			}
			if !same(next, p.Items) || (p.Next == 0) != (len(rest) == 0) {
				return broke(rule, "%s, %s from %+v) reads %s next %d, the rule %s and %d more", call, sc.name, c, show(p.Items), p.Next, show(next), len(rest))
			}
			if p.Next == 0 {
				break
			}
			if backward {
				c.Before = p.Next
			} else {
				c.After = p.Next
			}
		}
	}
	return nil
}

// holdScan holds a namespace's scan to the rule: every keyed value the
// scope sees, by key, each resolved under its own state's policy (a
// conversation's local state first; without one, what it inherits).
func (m *stateModel) holdScan(ctx context.Context, store storage.Storage, scope storage.Scope, namespace string) error {
	keys := map[string]bool{}
	levels := []ruleLevel{{conv: scope.ID}}
	if scope.Kind == storage.ScopeConversation {
		levels = m.chain(scope.ID, 0)
	}
	for _, l := range levels {
		for ref := range m.states {
			if ref.Namespace == namespace && ref.Key != "" && ref.Scope.Kind == scope.Kind && ref.Scope.ID == l.conv {
				keys[ref.Key] = true
			}
		}
	}
	var want []storage.KeyedVersion
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		ref := storage.StateRef{Scope: scope, Namespace: namespace, Key: key}
		if v, ok := valueOf(m.visible(ref, false, 0)); ok {
			want = append(want, storage.KeyedVersion{Key: key, Version: v})
		}
	}
	// One page, then pages of one key each: every page the next keys,
	// its Next zero exactly when no more remain.
	for _, limit := range []int{storage.PageLimitMax, 1} {
		var got []storage.KeyedVersion
		for q := (storage.ValueQuery{Scope: scope, Namespace: namespace, Limit: limit}); ; {
			p, err := store.ScanValues(ctx, q)
			if err != nil {
				return broke(ruleStateReads, "ScanValues(%s, %q, limit %d) fails: %v", scope, namespace, limit, err)
			}
			got = append(got, p.Items...)
			if len(got) > len(want) || (p.Next == 0) != (len(got) == len(want)) || len(p.Items) == 0 && p.Next != 0 {
				return broke(ruleStateReads, "ScanValues(%s, %q, limit %d) reads %s next %d after %q, the rule %s", scope, namespace, limit, showKeyed(got), p.Next, q.After, showKeyed(want))
			}
			if p.Next == 0 {
				break
			}
			q.After = p.Items[len(p.Items)-1].Key
		}
		if !slices.EqualFunc(want, got, func(a, b storage.KeyedVersion) bool {
			return a.Key == b.Key && a.Version.Seq == b.Version.Seq && bytes.Equal(a.Version.Value, b.Version.Value)
		}) {
			return broke(ruleStateReads, "ScanValues(%s, %q, limit %d) reads %s, the rule %s", scope, namespace, limit, showKeyed(got), showKeyed(want))
		}
	}
	return nil
}

func sameElements(a, b []storage.Element) bool {
	return slices.EqualFunc(a, b, func(x, y storage.Element) bool { return x.ID == y.ID && bytes.Equal(x.Value, y.Value) })
}

func showVersion(v storage.Version, ok bool) string {
	if !ok {
		return "nothing"
	}
	return fmt.Sprintf("%s (seq %d)", v.Value, v.Seq)
}

func showElements(es []storage.Element) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = fmt.Sprintf("%d:%s", e.ID, e.Value)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func showKeyed(vs []storage.KeyedVersion) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%s=%s@%d", v.Key, v.Version.Value, v.Version.Seq)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func showOps(ops []stateOp) string {
	parts := make([]string, len(ops))
	for i, op := range ops {
		switch op.typ {
		case storage.WriteListRemove:
			parts[i] = fmt.Sprintf("%d %s %d", op.seq, op.typ, op.element)
		case storage.WriteValueSet, storage.WriteListAppend:
			parts[i] = fmt.Sprintf("%d %s %s", op.seq, op.typ, op.value)
		default:
			parts[i] = fmt.Sprintf("%d %s", op.seq, op.typ)
		}
	}
	return strings.Join(parts, ", ")
}

// ruleForkCarries: a fork carries each value the host named that its
// source has, as the source has it when the fork is made, whatever its
// policy; one the source does not have it does not write, so the fork
// inherits what it would have (ForkOptions.Values, §9.1).
const ruleForkCarries oracleRule = "a-fork-carries-its-values"

// checkCarried holds fork, made of src at entry at, to the rule for the
// values it carried. Only the host writes the values a program names, and
// it waits for each of its actions, so the source still has them as the
// fork found them.
func (e *env) checkCarried(ctx context.Context, src, at, fork storage.ID, values []storage.Address) error {
	store := e.h.Store()
	for _, a := range values {
		from, to := a, a
		from.Scope.ID, to.Scope.ID = src, fork
		want, had, err := store.GetValue(ctx, from, 0)
		if err != nil {
			return err
		}
		if !had {
			if !a.Rewind {
				want = storage.Version{}
			} else if want, had, err = store.GetValue(ctx, from, at); err != nil {
				return err
			}
		}
		got, has, err := store.GetValue(ctx, to, 0)
		if err != nil {
			return err
		}
		if has != had || has && !bytes.Equal(got.Value, want.Value) {
			return e.oracle.fail(broke(ruleForkCarries, "fork %d of conversation %d at entry %d carries %s: it reads %s (has one: %t); want %s (has one: %t)",
				fork, src, at, a, got.Value, has, want.Value, had))
		}
	}
	return nil
}
