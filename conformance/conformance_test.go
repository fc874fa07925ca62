package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
	"github.com/pico-go/pico/storage/sqlite"
)

type ID = storage.ID

// TestMain runs the rapid property over at least 500 streams unless the
// user set -rapid.checks.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "rapid.checks" {
			set = true
		}
	})
	if f := flag.Lookup("rapid.checks"); f != nil && !set {
		_ = f.Value.Set("500")
	}
	os.Exit(m.Run())
}

var cmpOpts = []cmp.Option{cmpopts.EquateEmpty()}

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// ---------------------------------------------------------------------------
// Three backends in lockstep.

type trio struct {
	ctx      context.Context
	dir      string
	mem      *memory.Store
	jl       storage.Storage
	sq       storage.Storage
	accepted []storage.CommitBatch
}

func openTrio(t tb, ctx context.Context, dir string) *trio {
	t.Helper()
	jl, err := jsonl.Open(ctx, filepath.Join(dir, "s.jsonl"), jsonl.Options{})
	if err != nil {
		t.Fatalf("jsonl.Open: %v", err)
	}
	sq, err := sqlite.Open(ctx, filepath.Join(dir, "s.db"), sqlite.Options{Session: "s"})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	return &trio{ctx: ctx, dir: dir, mem: memory.New(), jl: jl, sq: sq}
}

func (x *trio) others() []struct {
	name string
	s    storage.Storage
} {
	return []struct {
		name string
		s    storage.Storage
	}{{"jsonl", x.jl}, {"sqlite", x.sq}}
}

// reopen closes and reopens the JSONL and SQLite backends.
func (x *trio) reopen(t tb) {
	t.Helper()
	if err := x.jl.Close(x.ctx); err != nil {
		t.Fatalf("jsonl Close: %v", err)
	}
	if err := x.sq.Close(x.ctx); err != nil {
		t.Fatalf("sqlite Close: %v", err)
	}
	var err error
	if x.jl, err = jsonl.Open(x.ctx, filepath.Join(x.dir, "s.jsonl"), jsonl.Options{}); err != nil {
		t.Fatalf("jsonl reopen: %v", err)
	}
	if x.sq, err = sqlite.Open(x.ctx, filepath.Join(x.dir, "s.db"), sqlite.Options{Session: "s"}); err != nil {
		t.Fatalf("sqlite reopen: %v", err)
	}
}

func (x *trio) close() {
	ctx := context.Background()
	_ = x.jl.Close(ctx)
	_ = x.sq.Close(ctx)
	_ = x.mem.Close(ctx)
}

func cloneBatch(b storage.CommitBatch) storage.CommitBatch {
	raw, err := json.Marshal(b)
	if err != nil {
		panic(err)
	}
	var out storage.CommitBatch
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return out
}

func dump(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(raw)
}

// commit commits the batch to memory first; only if memory accepts it goes
// to the others, which must accept it with the same range. A batch memory
// rejects must be rejected by the others too, at the same write.
func (x *trio) commit(t tb, b storage.CommitBatch) bool {
	t.Helper()
	r, err := x.mem.Commit(x.ctx, cloneBatch(b))
	if err != nil {
		var be *storage.BatchError
		if !errors.As(err, &be) {
			t.Fatalf("memory Commit: not a *storage.BatchError: %v", err)
		}
		for _, o := range x.others() {
			_, oerr := o.s.Commit(x.ctx, cloneBatch(b))
			var obe *storage.BatchError
			if !errors.As(oerr, &obe) || obe.Index != be.Index {
				t.Fatalf("%s Commit of a batch memory rejected (%v): error = %v; want a *storage.BatchError at index %d\nbatch: %s",
					o.name, be, oerr, be.Index, dump(b))
			}
			if got, want := o.s.LastSeq(), x.mem.LastSeq(); got != want {
				t.Fatalf("%s LastSeq after a rejected batch = %d; memory %d", o.name, got, want)
			}
		}
		return false
	}
	for _, o := range x.others() {
		or, oerr := o.s.Commit(x.ctx, cloneBatch(b))
		if oerr != nil {
			t.Fatalf("%s rejects a batch memory accepted: %v\nbatch: %s", o.name, oerr, dump(b))
		}
		if or != r {
			t.Fatalf("%s Commit range = %+v; memory %+v\nbatch: %s", o.name, or, r, dump(b))
		}
	}
	x.accepted = append(x.accepted, b)
	return true
}

// ---------------------------------------------------------------------------
// Observation: every query, answered by one backend.

type obs struct {
	Q string
	V any
}

type errRead struct{ Class string }

func classify(err error) errRead {
	switch {
	case errors.Is(err, storage.ErrHistoricalRead):
		return errRead{"historical"}
	case errors.Is(err, storage.ErrBadQuery):
		return errRead{"badquery"}
	case errors.Is(err, storage.ErrClosed):
		return errRead{"closed"}
	}
	var ae *storage.AddressError
	if errors.As(err, &ae) {
		return errRead{"address"}
	}
	return errRead{"error"}
}

type valueRead struct {
	V  storage.Version
	OK bool
}

type headRead struct {
	E  *storage.Entry
	OK bool
}

type ctxRead struct {
	Head ID
	IDs  []ID
}

// universe is what the observer asks about: derived once from the memory
// backend and the accepted stream, the same questions for every backend.
type universe struct {
	last      ID
	convs     []ID                 // every conversation ever created, plus a missing id
	positions map[ID][]ID          // conversation → entry positions to read at
	tasks     []ID                 // every task, plus a missing id
	addrs     []storage.Address    // every address touched, by String
	scopes    []storage.ValueQuery // (scope, namespace) pairs for ScanValues
}

func buildUniverse(ctx context.Context, mem storage.Storage, accepted []storage.CommitBatch) *universe {
	u := &universe{last: mem.LastSeq(), positions: map[ID][]ID{}}
	addrs := map[string]storage.Address{}
	nss := map[string]storage.ValueQuery{}
	taskSet := map[ID]bool{}
	for _, b := range accepted {
		for _, w := range b.Writes {
			switch w.Type {
			case storage.WriteCreateConversation:
				u.convs = append(u.convs, w.Conversation.ID)
			case storage.WriteTask:
				taskSet[w.Task.ID] = true
			}
			if w.Addr != nil {
				addrs[w.Addr.String()] = *w.Addr
				q := storage.ValueQuery{Scope: w.Addr.Scope, Namespace: w.Addr.Namespace}
				nss[q.Scope.String()+"/"+q.Namespace] = q
			}
		}
	}
	for id := range taskSet {
		u.tasks = append(u.tasks, id)
		// Scratch visibility of every task, written or not.
		for _, a := range []storage.Address{
			{Scope: storage.ScratchScope(id), Namespace: "x.v", Key: "a"},
			{Scope: storage.ScratchScope(id), Namespace: "x.l", Key: "a"},
		} {
			if _, ok := addrs[a.String()]; !ok {
				addrs[a.String()] = a
			}
		}
		q := storage.ValueQuery{Scope: storage.ScratchScope(id), Namespace: "x.v"}
		nss[q.Scope.String()+"/"+q.Namespace] = q
	}
	slices.Sort(u.tasks)
	u.tasks = append(u.tasks, u.last+7)
	slices.Sort(u.convs)
	for _, c := range u.convs {
		p, err := mem.ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationID: c})
		if err != nil {
			continue
		}
		ids := []ID{}
		for _, e := range p.Items {
			ids = append(ids, e.ID)
		}
		u.positions[c] = samplePositions(ids, c, u.last)
	}
	u.convs = append(u.convs, u.last+5)
	for _, a := range addrs {
		u.addrs = append(u.addrs, a)
	}
	sort.Slice(u.addrs, func(i, j int) bool { return u.addrs[i].String() < u.addrs[j].String() })
	for _, q := range nss {
		u.scopes = append(u.scopes, q)
	}
	sort.Slice(u.scopes, func(i, j int) bool {
		a, b := u.scopes[i], u.scopes[j]
		return a.Scope.String()+"/"+a.Namespace < b.Scope.String()+"/"+b.Namespace
	})
	return u
}

// samplePositions picks up to six entry ids of a transcript (first, last
// and evenly spaced ones), the conversation's own id (not an entry of it)
// and the position after everything.
func samplePositions(ids []ID, conv, last ID) []ID {
	var out []ID
	const n = 6
	if len(ids) <= n {
		out = append(out, ids...)
	} else {
		for i := range n {
			out = append(out, ids[i*(len(ids)-1)/(n-1)])
		}
	}
	out = append(out, conv, last+1)
	slices.Sort(out)
	return slices.Compact(out)
}

type observer struct {
	ctx context.Context
	s   storage.Storage
	out []obs
}

func (o *observer) add(q string, v any) { o.out = append(o.out, obs{q, v}) }

func observe(ctx context.Context, s storage.Storage, u *universe) []obs {
	o := &observer{ctx: ctx, s: s}
	o.add("LastSeq", s.LastSeq())
	// Every conversation.
	ids := append([]ID{}, u.convs...)
	if m, err := s.GetConversations(ctx, ids); err != nil {
		o.add("GetConversations", classify(err))
	} else {
		o.add("GetConversations", m)
	}
	all := storage.Cursor{Limit: storage.PageLimitMax}
	o.scanConvs("ScanConversations(all)", storage.ConversationQuery{Cursor: all})
	o.walkConvs("ScanConversations walk forward", storage.ConversationQuery{}, false)
	o.walkConvs("ScanConversations walk backward", storage.ConversationQuery{}, true)
	for _, c := range u.convs {
		o.scanConvs(fmt.Sprintf("ScanConversations(Parent %d)", c), storage.ConversationQuery{Cursor: all, Parent: c})
		o.scanConvs(fmt.Sprintf("ScanConversations(OwnedFrom %d)", c), storage.ConversationQuery{Cursor: all, OwnedFrom: c})
	}
	o.walkConvs("ScanConversations(Parent) walk", storage.ConversationQuery{Parent: u.convs[0]}, false)

	// Transcripts, heads and contexts.
	for _, c := range u.convs {
		o.scanEntries(fmt.Sprintf("ScanEntries(%d)", c), storage.EntryQuery{Cursor: all, ConversationID: c})
		o.walkEntries(fmt.Sprintf("ScanEntries(%d) walk forward", c), storage.EntryQuery{ConversationID: c}, false)
		o.walkEntries(fmt.Sprintf("ScanEntries(%d) walk backward", c), storage.EntryQuery{ConversationID: c}, true)
		o.scanEntries(fmt.Sprintf("ScanEntries(%d kind summary)", c), storage.EntryQuery{Cursor: all, ConversationID: c, Kind: "summary"})
		o.scanEntries(fmt.Sprintf("ScanEntries(%d key call-1)", c), storage.EntryQuery{Cursor: all, ConversationID: c, Key: "call-1"})
		pos := u.positions[c]
		if len(pos) >= 2 {
			q := storage.EntryQuery{Cursor: all, ConversationID: c, From: pos[len(pos)/3], Through: pos[2*len(pos)/3]}
			o.scanEntries(fmt.Sprintf("ScanEntries(%d from %d through %d)", c, q.From, q.Through), q)
		}
		for _, at := range append([]ID{0}, pos...) {
			e, ok, err := s.NewestHead(ctx, c, at)
			if err != nil {
				o.add(fmt.Sprintf("NewestHead(%d, %d)", c, at), classify(err))
			} else {
				o.add(fmt.Sprintf("NewestHead(%d, %d)", c, at), headRead{e, ok})
			}
			dc, err := core.DeriveContext(ctx, s, c, at)
			if err != nil {
				o.add(fmt.Sprintf("DeriveContext(%d, %d)", c, at), classify(err))
			} else {
				r := ctxRead{IDs: dc.IDs()}
				if dc.Head != nil {
					r.Head = dc.Head.ID
				}
				o.add(fmt.Sprintf("DeriveContext(%d, %d)", c, at), r)
			}
		}
	}
	var entryIDs []ID
	for id := ID(1); id <= u.last+1; id++ {
		entryIDs = append(entryIDs, id)
	}
	if m, err := s.GetEntries(ctx, entryIDs); err != nil {
		o.add("GetEntries", classify(err))
	} else {
		o.add("GetEntries", m)
	}
	if k, err := s.EntryKinds(ctx); err != nil {
		o.add("EntryKinds", classify(err))
	} else {
		o.add("EntryKinds", k)
	}

	// State.
	for _, a := range u.addrs {
		list := a.Namespace == "c.rl" || a.Namespace == "c.sl" || a.Namespace == "x.l" || a.Namespace == "s.l"
		ats := []ID{0}
		if a.Historical() {
			ats = append(ats, u.positions[a.Scope.ID]...)
		} else if a.Scope.Kind == storage.ScopeConversation {
			ats = append(ats, a.Scope.ID+1) // a historical read of sticky state
		}
		for _, at := range ats {
			if list {
				o.readList(fmt.Sprintf("ReadList(%s, at %d)", a, at), a, storage.ListQuery{Cursor: all, At: at})
			} else {
				v, ok, err := s.GetValue(ctx, a, at)
				if err != nil {
					o.add(fmt.Sprintf("GetValue(%s, %d)", a, at), classify(err))
				} else {
					o.add(fmt.Sprintf("GetValue(%s, %d)", a, at), valueRead{v, ok})
				}
			}
		}
		if list {
			o.walkList(fmt.Sprintf("ReadList(%s) walk forward", a), a, false)
			o.walkList(fmt.Sprintf("ReadList(%s) walk backward", a), a, true)
		}
	}
	for _, q := range u.scopes {
		o.scanValues(q, 1)
		o.scanValues(q, 100)
	}

	// Tasks.
	if m, err := s.GetTasks(ctx, u.tasks); err != nil {
		o.add("GetTasks", classify(err))
	} else {
		o.add("GetTasks", m)
	}
	for _, live := range []*bool{nil, storage.Bool(true), storage.Bool(false)} {
		name := "nil"
		if live != nil {
			name = fmt.Sprint(*live)
		}
		o.scanTasks("ScanTasks(Live "+name+")", storage.TaskQuery{Cursor: all, Live: live})
		o.walkTasks("ScanTasks(Live "+name+") walk", storage.TaskQuery{Live: live})
		for _, c := range u.convs {
			if live != nil && !*live {
				continue
			}
			o.scanTasks(fmt.Sprintf("ScanTasks(conv %d, Live %s)", c, name), storage.TaskQuery{Cursor: all, Live: live, ConversationIDs: []ID{c}})
		}
	}
	o.scanTasks("ScanTasks(Role inflight)", storage.TaskQuery{Cursor: all, Role: storage.RoleInflight})
	o.scanTasks("ScanTasks(Abort true, Live true)", storage.TaskQuery{Cursor: all, Live: storage.Bool(true), Abort: storage.Bool(true)})
	o.scanTasks("ScanTasks(Kind tool)", storage.TaskQuery{Cursor: all, Kind: "tool"})
	return o.out
}

func (o *observer) scanConvs(name string, q storage.ConversationQuery) {
	p, err := o.s.ScanConversations(o.ctx, q)
	if err != nil {
		o.add(name, classify(err))
		return
	}
	o.add(name, p)
}

func (o *observer) scanEntries(name string, q storage.EntryQuery) {
	p, err := o.s.ScanEntries(o.ctx, q)
	if err != nil {
		o.add(name, classify(err))
		return
	}
	o.add(name, p)
}

func (o *observer) readList(name string, a storage.Address, q storage.ListQuery) {
	p, err := o.s.ReadList(o.ctx, a, q)
	if err != nil {
		o.add(name, classify(err))
		return
	}
	o.add(name, p)
}

func (o *observer) scanTasks(name string, q storage.TaskQuery) {
	p, err := o.s.ScanTasks(o.ctx, q)
	if err != nil {
		o.add(name, classify(err))
		return
	}
	o.add(name, p)
}

// walk pages with a small limit, forward from the start or backward from
// the end, recording every page.
func walk[T any](o *observer, name string, backward bool, read func(c storage.Cursor) (storage.Page[T], error)) {
	const limit = 2
	c := storage.Cursor{Limit: limit}
	if backward {
		c.Before = ID(1) << 60
	}
	var pages []storage.Page[T]
	for range 200 {
		p, err := read(c)
		if err != nil {
			o.add(name, classify(err))
			return
		}
		pages = append(pages, p)
		if p.Next == 0 {
			break
		}
		if backward {
			c.Before = p.Next
		} else {
			c.After = p.Next
		}
	}
	o.add(name, pages)
}

func (o *observer) walkConvs(name string, q storage.ConversationQuery, backward bool) {
	walk(o, name, backward, func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
		q.Cursor = c
		return o.s.ScanConversations(o.ctx, q)
	})
}

func (o *observer) walkEntries(name string, q storage.EntryQuery, backward bool) {
	walk(o, name, backward, func(c storage.Cursor) (storage.Page[*storage.Entry], error) {
		q.Cursor = c
		return o.s.ScanEntries(o.ctx, q)
	})
}

func (o *observer) walkList(name string, a storage.Address, backward bool) {
	walk(o, name, backward, func(c storage.Cursor) (storage.Page[storage.Element], error) {
		return o.s.ReadList(o.ctx, a, storage.ListQuery{Cursor: c})
	})
}

func (o *observer) walkTasks(name string, q storage.TaskQuery) {
	walk(o, name, false, func(c storage.Cursor) (storage.Page[*storage.Task], error) {
		q.Cursor = c
		return o.s.ScanTasks(o.ctx, q)
	})
}

func (o *observer) scanValues(q storage.ValueQuery, limit int) {
	name := fmt.Sprintf("ScanValues(%s %q, limit %d)", q.Scope, q.Namespace, limit)
	q.Limit = limit
	var pages []storage.Page[storage.KeyedVersion]
	for range 50 {
		p, err := o.s.ScanValues(o.ctx, q)
		if err != nil {
			o.add(name, classify(err))
			return
		}
		pages = append(pages, p)
		if p.Next == 0 || len(p.Items) == 0 {
			break
		}
		q.After = p.Items[len(p.Items)-1].Key
	}
	o.add(name, pages)
}

// compare observes every backend and fails with a go-cmp diff for each
// query on which JSONL or SQLite disagrees with memory.
func compare(t tb, x *trio, stage string) {
	t.Helper()
	u := buildUniverse(x.ctx, x.mem, x.accepted)
	want := observe(x.ctx, x.mem, u)
	var failures []string
	for _, o := range x.others() {
		got := observe(x.ctx, o.s, u)
		for i := range want {
			if reflect.DeepEqual(want[i].V, got[i].V) {
				continue // the fast path; cmp below is the judge
			}
			if d := cmp.Diff(want[i].V, got[i].V, cmpOpts...); d != "" {
				failures = append(failures, fmt.Sprintf("%s: %s disagrees with memory on %s (-memory +%s):\n%s",
					stage, o.name, want[i].Q, o.name, d))
			}
		}
	}
	if len(failures) > 0 {
		t.Logf("accepted stream (%d batches):", len(x.accepted))
		for i, b := range x.accepted {
			t.Logf("  batch %d: %s", i, dump(b))
		}
		if len(failures) > 6 {
			failures = append(failures[:6], fmt.Sprintf("... and %d more disagreements", len(failures)-6))
		}
		msg := ""
		for _, f := range failures {
			msg += f + "\n"
		}
		t.Fatalf("backends disagree:\n%s", msg)
	}
}

// ---------------------------------------------------------------------------
// The random stream generator. The memory backend is the source of truth
// for choices (fork points, elements to remove); the generator tracks only
// what it needs to aim writes at live records.

type gen struct {
	t     *rapid.T
	x     *trio
	convs []ID // created, not deleted
	owner map[ID]ID
	tasks map[ID]bool // task → live
	order []ID        // tasks in creation order
	lists []storage.Address
	n     int // value counter
}

type batchState struct {
	first   ID
	writes  []storage.Write
	convs   []ID // created in this batch
	deleted map[ID]bool
	tasks   []ID // created in this batch
	changed map[ID]bool
}

func (b *batchState) seq() ID { return b.first + ID(len(b.writes)) }

func pick[T any](t *rapid.T, label string, xs []T) T {
	return xs[rapid.IntRange(0, len(xs)-1).Draw(t, label)]
}

func js(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}

var (
	entryKinds = []string{"user", "assistant", "tool_result", "summary", "note"}
	entryKeys  = []string{"", "", "call-1", "call-2"}
	stateKeys  = []string{"a", "a", "b", ""}
	mainWrites = []string{
		"conv", "fork", "fork", "fork",
		"entry", "entry", "entry", "entry", "entry", "entry", "entry",
		"rv.set", "rv.set", "rv.del", "sv.set", "sv.del",
		"rl.app", "rl.app", "rl.app", "rl.rm", "rl.rm", "rl.clear",
		"sl.app", "sl.app", "sl.rm", "sl.clear",
		"sess.set", "sess.del", "req.set", "req.del", "sess.list",
		"task", "task", "taskOwns", "patch", "patch", "settle", "settle", "convOwned",
		"delConv", "invalid",
	}
)

func caddr(ns string, conv ID, key string, rewind bool) storage.Address {
	return storage.Address{Scope: storage.ConversationScope(conv), Namespace: ns, Key: key, Rewind: rewind}
}

func (g *gen) value() json.RawMessage {
	g.n++
	return js(map[string]any{"v": g.n})
}

func (g *gen) liveConvs(b *batchState) []ID {
	var out []ID
	for _, c := range append(slices.Clone(g.convs), b.convs...) {
		if !b.deleted[c] {
			out = append(out, c)
		}
	}
	return out
}

func (g *gen) committedConvs(b *batchState) []ID {
	var out []ID
	for _, c := range g.convs {
		if !b.deleted[c] {
			out = append(out, c)
		}
	}
	return out
}

func (g *gen) transcript(conv ID) []*storage.Entry {
	p, err := g.x.mem.ScanEntries(g.x.ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationID: conv})
	if err != nil {
		return nil
	}
	return p.Items
}

func (g *gen) liveTasks(b *batchState) []ID {
	var out []ID
	for _, id := range g.order {
		if g.tasks[id] && !b.changed[id] {
			out = append(out, id)
		}
	}
	return out
}

func (g *gen) batch() {
	rt := g.t
	b := &batchState{first: g.x.mem.LastSeq() + 1, deleted: map[ID]bool{}, changed: map[ID]bool{}}
	if len(g.order) > 0 && rapid.IntRange(0, 4).Draw(rt, "scratch") == 0 {
		g.scratchBatch(b)
		return
	}
	n := rapid.IntRange(1, 6).Draw(rt, "writes")
	for range n {
		g.drawMain(b)
	}
	batch := storage.CommitBatch{Kind: storage.BatchMain, Writes: b.writes}
	if g.x.commit(rt, batch) {
		g.apply(batch)
	}
}

func (g *gen) apply(batch storage.CommitBatch) {
	for _, w := range batch.Writes {
		if w.Type == storage.WriteListAppend && !slices.Contains(g.lists, *w.Addr) {
			g.lists = append(g.lists, *w.Addr)
		}
		switch w.Type {
		case storage.WriteCreateConversation:
			g.convs = append(g.convs, w.Conversation.ID)
			g.owner[w.Conversation.ID] = w.Conversation.Owner
		case storage.WriteDeleteConversation:
			g.convs = slices.DeleteFunc(g.convs, func(c ID) bool { return c == w.ID })
		case storage.WriteTask:
			g.tasks[w.Task.ID] = true
			g.order = append(g.order, w.Task.ID)
		case storage.WriteSettle:
			g.tasks[w.ID] = false
		}
	}
}

func (g *gen) scratchBatch(b *batchState) {
	rt := g.t
	var task ID
	live := g.liveTasks(b)
	if len(live) > 0 && rapid.IntRange(0, 7).Draw(rt, "scratchAnyTask") != 0 {
		task = pick(rt, "scratchTask", live)
	} else {
		task = pick(rt, "scratchTask", g.order) // possibly settled: rejected
	}
	sc := storage.ScratchScope(task)
	n := rapid.IntRange(1, 4).Draw(rt, "scratchWrites")
	for range n {
		key := pick(rt, "scratchKey", []string{"a", "a", "b"})
		va := storage.Address{Scope: sc, Namespace: "x.v", Key: key}
		la := storage.Address{Scope: sc, Namespace: "x.l", Key: key}
		var w storage.Write
		switch rapid.IntRange(0, 5).Draw(rt, "scratchWrite") {
		case 0, 1:
			w = storage.Write{Type: storage.WriteValueSet, Addr: &va, Value: g.value()}
		case 2:
			w = storage.Write{Type: storage.WriteValueDelete, Addr: &va}
		case 3:
			w = g.remove(la, b)
		case 4:
			w = storage.Write{Type: storage.WriteListClear, Addr: &la}
		default:
			w = storage.Write{Type: storage.WriteListAppend, Addr: &la, Value: g.value()}
		}
		b.writes = append(b.writes, w)
	}
	batch := storage.CommitBatch{Kind: storage.BatchScratch, Task: task, Writes: b.writes}
	if g.x.commit(rt, batch) {
		g.apply(batch)
	}
}

// remove removes a visible element of the list (committed state), or
// appends when it has none.
func (g *gen) remove(a storage.Address, b *batchState) storage.Write {
	read := func(a storage.Address) []storage.Element {
		p, err := g.x.mem.ReadList(g.x.ctx, a, storage.ListQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}})
		if err != nil {
			return nil
		}
		return p.Items
	}
	if items := read(a); len(items) > 0 {
		e := pick(g.t, "element", items)
		return storage.Write{Type: storage.WriteListRemove, Addr: &a, Element: e.ID}
	}
	// Any other list of the namespace in a scope this batch may write.
	var removes []storage.Write
	for _, l := range g.lists {
		if l.Namespace != a.Namespace || l.Rewind != a.Rewind || b.deleted[l.Scope.ID] ||
			(a.Scope.Kind == storage.ScopeScratch && l.Scope != a.Scope) {
			continue
		}
		if l.Scope.Kind == storage.ScopeConversation && !slices.Contains(g.convs, l.Scope.ID) {
			continue
		}
		for _, e := range read(l) {
			removes = append(removes, storage.Write{Type: storage.WriteListRemove, Addr: &l, Element: e.ID})
		}
	}
	if len(removes) > 0 {
		return pick(g.t, "otherRemove", removes)
	}
	return storage.Write{Type: storage.WriteListAppend, Addr: &a, Value: g.value()}
}

func (g *gen) drawMain(b *batchState) {
	rt := g.t
	seq := b.seq()
	live := g.liveConvs(b)
	add := func(w storage.Write) { b.writes = append(b.writes, w) }
	newConv := func(c *storage.Conversation) {
		add(storage.Write{Type: storage.WriteCreateConversation, Conversation: c})
		b.convs = append(b.convs, c.ID)
	}
	if len(live) == 0 {
		newConv(&storage.Conversation{ID: seq})
		return
	}
	conv := live[len(live)-1]
	if rapid.Bool().Draw(rt, "anyConv") {
		conv = pick(rt, "conv", live)
	}
	key := pick(rt, "key", stateKeys)
	rv := caddr("c.rv", conv, key, true)
	sv := caddr("c.sv", conv, key, false)
	rl := caddr("c.rl", conv, key, true)
	sl := caddr("c.sl", conv, key, false)
	sess := storage.Address{Scope: storage.SessionScope(), Namespace: "s.v", Key: key}
	req := storage.Address{Scope: storage.SessionScope(), Namespace: "s.req", Key: fmt.Sprintf("req-%d", rapid.IntRange(1, 3).Draw(rt, "req"))}
	slist := storage.Address{Scope: storage.SessionScope(), Namespace: "s.l", Key: key}
	committed := g.committedConvs(b)
	isCommitted := slices.Contains(committed, conv)
	switch pick(rt, "write", mainWrites) {
	case "conv":
		newConv(&storage.Conversation{ID: seq})
	case "fork":
		if len(committed) == 0 {
			newConv(&storage.Conversation{ID: seq})
			return
		}
		src := pick(rt, "forkSource", committed)
		var at ID // the start of the transcript when it is drawn or there is nothing else
		if tr := g.transcript(src); len(tr) > 0 && rapid.IntRange(0, 4).Draw(rt, "forkAtStart") > 0 {
			at = pick(rt, "forkAt", tr).ID
		}
		c := &storage.Conversation{ID: seq, Parent: &storage.ParentRef{ConversationID: src, At: at}}
		if len(g.order) > 0 && rapid.IntRange(0, 3).Draw(rt, "forkOwned") == 0 {
			c.Owner = pick(rt, "forkOwner", g.order)
		}
		newConv(c)
	case "entry":
		add(g.entry(seq, conv, isCommitted))
	case "rv.set":
		add(storage.Write{Type: storage.WriteValueSet, Addr: &rv, Value: g.value()})
	case "rv.del":
		add(storage.Write{Type: storage.WriteValueDelete, Addr: &rv})
	case "sv.set":
		add(storage.Write{Type: storage.WriteValueSet, Addr: &sv, Value: g.value()})
	case "sv.del":
		add(storage.Write{Type: storage.WriteValueDelete, Addr: &sv})
	case "rl.app":
		add(storage.Write{Type: storage.WriteListAppend, Addr: &rl, Value: g.value()})
	case "rl.rm":
		add(g.remove(rl, b))
	case "rl.clear":
		add(storage.Write{Type: storage.WriteListClear, Addr: &rl})
	case "sl.app":
		add(storage.Write{Type: storage.WriteListAppend, Addr: &sl, Value: g.value()})
	case "sl.rm":
		add(g.remove(sl, b))
	case "sl.clear":
		add(storage.Write{Type: storage.WriteListClear, Addr: &sl})
	case "sess.set":
		add(storage.Write{Type: storage.WriteValueSet, Addr: &sess, Value: g.value()})
	case "sess.del":
		add(storage.Write{Type: storage.WriteValueDelete, Addr: &sess})
	case "req.set":
		add(storage.Write{Type: storage.WriteValueSet, Addr: &req, Value: js(map[string]any{"request": g.value(), "conv": conv})})
	case "req.del":
		add(storage.Write{Type: storage.WriteValueDelete, Addr: &req})
	case "sess.list":
		switch rapid.IntRange(0, 3).Draw(rt, "sessList") {
		case 0:
			add(g.remove(slist, b))
		case 1:
			add(storage.Write{Type: storage.WriteListClear, Addr: &slist})
		default:
			add(storage.Write{Type: storage.WriteListAppend, Addr: &slist, Value: g.value()})
		}
	case "task":
		add(storage.Write{Type: storage.WriteTask, Task: g.task(seq, conv)})
		b.tasks = append(b.tasks, seq)
	case "taskOwns":
		t := g.task(seq, conv)
		t.Owns = []ID{seq + 1}
		add(storage.Write{Type: storage.WriteTask, Task: t})
		b.tasks = append(b.tasks, seq)
		newConv(&storage.Conversation{ID: seq + 1, Owner: seq})
	case "convOwned":
		if len(g.order) == 0 {
			newConv(&storage.Conversation{ID: seq})
			return
		}
		newConv(&storage.Conversation{ID: seq, Owner: pick(rt, "owner", g.order)})
	case "patch":
		lt := g.liveTasks(b)
		if len(lt) == 0 {
			add(g.entry(seq, conv, isCommitted))
			return
		}
		id := pick(rt, "patchTask", lt)
		b.changed[id] = true
		w := storage.Write{Type: storage.WritePatch, ID: id}
		switch rapid.IntRange(0, 4).Draw(rt, "patchKind") {
		case 0:
			w.Status, w.Role = "running", storage.RoleInflight
		case 1:
			w.Status, w.Role = "queued", storage.RoleStart
		case 2:
			w.State = g.value()
		case 3:
			w.Abort = true
			w.Status, w.Role = "aborting", storage.RoleInflight
		default:
			var owned []ID
			for _, c := range g.convs {
				if g.owner[c] == id && !b.deleted[c] {
					owned = append(owned, c)
				}
			}
			if len(owned) == 0 {
				w.State = g.value()
			} else {
				w.Owns = owned
			}
		}
		add(w)
	case "settle":
		lt := g.liveTasks(b)
		if len(lt) == 0 {
			add(g.entry(seq, conv, isCommitted))
			return
		}
		id := pick(rt, "settleTask", lt)
		b.changed[id] = true
		w := storage.Write{Type: storage.WriteSettle, ID: id, Status: pick(rt, "settleStatus", []string{"done", "failed"}), Role: storage.RoleTerminal}
		if rapid.Bool().Draw(rt, "settleState") {
			w.State = g.value()
		}
		add(w)
	case "delConv":
		if rapid.IntRange(0, 3).Draw(rt, "reallyDelete") == 0 {
			add(storage.Write{Type: storage.WriteDeleteConversation, ID: conv})
			b.deleted[conv] = true
			return
		}
		add(g.entry(seq, conv, isCommitted))
	case "invalid":
		add(g.invalid(seq, conv))
	}
}

func (g *gen) entry(seq, conv ID, committed bool) storage.Write {
	rt := g.t
	e := &storage.Entry{ID: seq, ConversationID: conv, Kind: pick(rt, "kind", entryKinds), Key: pick(rt, "entryKey", entryKeys)}
	switch rapid.IntRange(0, 9).Draw(rt, "head") {
	case 0, 1:
		e.Head = seq
	case 2, 3:
		if tr := g.transcript(conv); committed && len(tr) > 0 {
			e.Head = pick(rt, "headAt", tr).ID
			e.Kind = "summary"
		}
	}
	if rapid.IntRange(0, 3).Draw(rt, "data") == 0 {
		e.Data = js(map[string]any{"n": seq})
	}
	switch rapid.IntRange(0, 3).Draw(rt, "model") {
	case 0:
		e.Model = []ai.Message{{Role: ai.RoleUser, Content: ai.PlainText(fmt.Sprintf("u%d", seq))}}
	case 1:
		e.Model = []ai.Message{{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text(fmt.Sprintf("a%d", seq)))}}
	}
	if g.x.mem.LastSeq() > 0 && rapid.IntRange(0, 5).Draw(rt, "edit") == 0 {
		target := ID(rapid.IntRange(1, int(g.x.mem.LastSeq())).Draw(rt, "editTarget"))
		if tr := g.transcript(conv); len(tr) > 0 && rapid.Bool().Draw(rt, "editVisible") {
			target = pick(rt, "editEntry", tr).ID
		}
		ed := storage.ContextEdit{Target: target, Action: storage.EditOmit}
		if rapid.Bool().Draw(rt, "replace") {
			ed.Action = storage.EditReplace
			ed.Messages = []ai.Message{{Role: ai.RoleUser, Content: ai.PlainText(fmt.Sprintf("r%d", seq))}}
		}
		e.Edits = []storage.ContextEdit{ed}
	}
	if len(g.order) > 0 && rapid.IntRange(0, 3).Draw(rt, "byTask") == 0 {
		e.ByTaskID = pick(rt, "byTaskID", g.order)
	}
	return storage.Write{Type: storage.WriteEntry, Entry: e}
}

func (g *gen) task(seq, conv ID) *storage.Task {
	rt := g.t
	t := &storage.Task{
		ID: seq, ConversationID: conv,
		Kind:       pick(rt, "taskKind", []string{"tool", "agent"}),
		Background: rapid.IntRange(0, 3).Draw(rt, "background") == 0,
	}
	if rapid.Bool().Draw(rt, "inflight") {
		t.Status, t.Role = "running", storage.RoleInflight
	} else {
		t.Status, t.Role = "queued", storage.RoleStart
	}
	if rapid.Bool().Draw(rt, "taskState") {
		t.State = g.value()
	}
	if len(g.order) > 0 && rapid.IntRange(0, 2).Draw(rt, "after") == 0 {
		t.After = []ID{pick(rt, "afterTask", g.order)}
	}
	return t
}

// invalid draws a write that breaks a rule (most of the time).
func (g *gen) invalid(seq, conv ID) storage.Write {
	rt := g.t
	switch rapid.IntRange(0, 6).Draw(rt, "invalidWrite") {
	case 0:
		return storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: seq, ConversationID: seq + 1000, Kind: "user"}}
	case 1:
		a := caddr("c.rv", conv, "a", false) // the other policy
		return storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: js("x")}
	case 2:
		a := caddr("c.rl", conv, "a", true)
		return storage.Write{Type: storage.WriteListRemove, Addr: &a, Element: seq + 50}
	case 3:
		for _, id := range g.order {
			if !g.tasks[id] {
				return storage.Write{Type: storage.WritePatch, ID: id, State: js("late")}
			}
		}
	case 4:
		return storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{
			ID: seq, Parent: &storage.ParentRef{ConversationID: conv, At: conv},
		}}
	case 5:
		a := storage.Address{Scope: storage.ScratchScope(conv), Namespace: "x.v"}
		return storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: js(1)}
	}
	return storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: seq + 1, ConversationID: conv, Kind: "user"}}
}

// ---------------------------------------------------------------------------
// The property.

func TestThreeWayConformance(t *testing.T) {
	base := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(base, "case")
		if err != nil {
			rt.Fatalf("MkdirTemp: %v", err)
		}
		defer os.RemoveAll(dir)
		ctx := context.Background()
		x := openTrio(rt, ctx, dir)
		defer x.close()
		g := &gen{t: rt, x: x, owner: map[ID]ID{}, tasks: map[ID]bool{}}
		n := rapid.IntRange(5, 25).Draw(rt, "batches")
		for range n {
			g.batch()
		}
		x.reopen(rt)
		compare(rt, x, "after reopen")
		// The next allocated sequence, through an empty commit.
		r, err := x.mem.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain})
		if err != nil {
			rt.Fatalf("memory empty Commit: %v", err)
		}
		for _, o := range x.others() {
			or, err := o.s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain})
			if err != nil || or != r {
				rt.Fatalf("%s empty Commit = %+v, %v; memory %+v", o.name, or, err, r)
			}
		}
	})
}

// ---------------------------------------------------------------------------
// Deep forks, by hand.

// builder numbers the writes of hand-written batches.
type builder struct {
	next    ID
	pending []storage.Write
	batches []storage.CommitBatch
}

func (b *builder) add(w storage.Write) ID {
	id := b.next
	b.next++
	b.pending = append(b.pending, w)
	return id
}

func (b *builder) conv() ID {
	return b.add(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: b.next}})
}

func (b *builder) fork(src, at ID) ID {
	return b.add(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{
		ID: b.next, Parent: &storage.ParentRef{ConversationID: src, At: at},
	}})
}

func (b *builder) entry(conv ID) ID {
	return b.add(storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: b.next, ConversationID: conv, Kind: "user"}})
}

func (b *builder) summary(conv, head ID) ID {
	return b.add(storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: b.next, ConversationID: conv, Kind: "summary", Head: head}})
}

func (b *builder) set(a storage.Address, v string) ID {
	return b.add(storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: js(v)})
}

func (b *builder) del(a storage.Address) ID {
	return b.add(storage.Write{Type: storage.WriteValueDelete, Addr: &a})
}

func (b *builder) app(a storage.Address, v string) ID {
	return b.add(storage.Write{Type: storage.WriteListAppend, Addr: &a, Value: js(v)})
}

func (b *builder) clear(a storage.Address) ID {
	return b.add(storage.Write{Type: storage.WriteListClear, Addr: &a})
}

// commit closes the pending writes into one batch.
func (b *builder) commit() {
	if len(b.pending) > 0 {
		b.batches = append(b.batches, storage.CommitBatch{Kind: storage.BatchMain, Writes: b.pending})
		b.pending = nil
	}
}

func rvA(c ID) storage.Address { return caddr("c.rv", c, "a", true) }
func svA(c ID) storage.Address { return caddr("c.sv", c, "a", false) }
func rlA(c ID) storage.Address { return caddr("c.rl", c, "a", true) }

// expectation is one read every backend must answer as stated.
type expectation struct {
	what string
	read func(ctx context.Context, s storage.Storage) (any, error)
	want any
}

func expectValue(a storage.Address, at ID, want string) expectation {
	var w any = valueAbsent{}
	if want != "" {
		w = want
	}
	return expectation{fmt.Sprintf("GetValue(%s, %d)", a, at), func(ctx context.Context, s storage.Storage) (any, error) {
		v, ok, err := s.GetValue(ctx, a, at)
		if err != nil || !ok {
			return valueAbsent{}, err
		}
		var str string
		if err := json.Unmarshal(v.Value, &str); err != nil {
			return nil, err
		}
		return str, nil
	}, w}
}

type valueAbsent struct{}

func expectList(a storage.Address, at ID, want ...string) expectation {
	return expectation{fmt.Sprintf("ReadList(%s, at %d)", a, at), func(ctx context.Context, s storage.Storage) (any, error) {
		p, err := s.ReadList(ctx, a, storage.ListQuery{Cursor: storage.Cursor{Limit: 100}, At: at})
		if err != nil {
			return nil, err
		}
		out := []string{}
		for _, e := range p.Items {
			var str string
			if err := json.Unmarshal(e.Value, &str); err != nil {
				return nil, err
			}
			out = append(out, str)
		}
		return out, nil
	}, append([]string{}, want...)}
}

func expectTranscript(conv ID, want ...ID) expectation {
	return expectation{fmt.Sprintf("transcript of %d", conv), func(ctx context.Context, s storage.Storage) (any, error) {
		p, err := s.ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 100}, ConversationID: conv})
		if err != nil {
			return nil, err
		}
		out := []ID{}
		for _, e := range p.Items {
			out = append(out, e.ID)
		}
		return out, nil
	}, append([]ID{}, want...)}
}

func expectHead(conv, at, want ID) expectation {
	return expectation{fmt.Sprintf("NewestHead(%d, %d)", conv, at), func(ctx context.Context, s storage.Storage) (any, error) {
		e, ok, err := s.NewestHead(ctx, conv, at)
		if err != nil || !ok {
			return ID(0), err
		}
		return e.ID, nil
	}, want}
}

func expectContext(conv, through ID, want ...ID) expectation {
	return expectation{fmt.Sprintf("DeriveContext(%d, %d)", conv, through), func(ctx context.Context, s storage.Storage) (any, error) {
		c, err := core.DeriveContext(ctx, s, conv, through)
		if err != nil {
			return nil, err
		}
		return c.IDs(), nil
	}, append([]ID{}, want...)}
}

func expectHistoricalError(a storage.Address, at ID) expectation {
	return expectation{fmt.Sprintf("GetValue(%s, %d) error", a, at), func(ctx context.Context, s storage.Storage) (any, error) {
		_, _, err := s.GetValue(ctx, a, at)
		return errors.Is(err, storage.ErrHistoricalRead), nil
	}, true}
}

// sequence runs expectations in order on one backend (so that a read can be
// checked not to disturb a later one).
func expectSequence(what string, es ...expectation) expectation {
	return expectation{what, func(ctx context.Context, s storage.Storage) (any, error) {
		var out []any
		for _, e := range es {
			v, err := e.read(ctx, s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.what, err)
			}
			out = append(out, v)
		}
		return out, nil
	}, func() any {
		var out []any
		for _, e := range es {
			out = append(out, e.want)
		}
		return out
	}()}
}

func TestDeepForks(t *testing.T) {
	type deepCase struct {
		name  string
		build func(b *builder) []expectation
	}
	cases := []deepCase{
		{"fork before and after a value delete", func(b *builder) []expectation {
			c := b.conv()
			b.entry(c)
			b.set(rvA(c), "x")
			e2 := b.entry(c)
			b.commit()
			b.del(rvA(c))
			e3 := b.entry(c)
			b.commit()
			before, after := b.fork(c, e2), b.fork(c, e3)
			b.commit()
			b.set(rvA(c), "later")
			b.entry(c)
			b.commit()
			return []expectation{
				expectValue(rvA(before), 0, "x"),
				expectValue(rvA(after), 0, ""),
				expectValue(rvA(c), e2, "x"),
				expectValue(rvA(c), e3, ""),
				expectValue(rvA(c), 0, "later"),
			}
		}},
		{"fork before and after a list clear", func(b *builder) []expectation {
			c := b.conv()
			b.app(rlA(c), "1")
			b.entry(c)
			b.app(rlA(c), "2")
			e2 := b.entry(c)
			b.commit()
			b.clear(rlA(c))
			e3 := b.entry(c)
			b.commit()
			b.app(rlA(c), "3")
			e4 := b.entry(c)
			b.commit()
			f2, f3, f4 := b.fork(c, e2), b.fork(c, e3), b.fork(c, e4)
			b.commit()
			b.app(rlA(f2), "f2")
			b.clear(rlA(f4))
			b.app(rlA(f4), "f4")
			b.commit()
			return []expectation{
				expectList(rlA(f2), 0, "1", "2", "f2"),
				expectList(rlA(f3), 0),
				expectList(rlA(f4), 0, "f4"),
				expectList(rlA(c), e2, "1", "2"),
				expectList(rlA(c), e3),
				expectList(rlA(c), 0, "3"),
			}
		}},
		{"fork before a later summary head", func(b *builder) []expectation {
			c := b.conv()
			e1, e2 := b.entry(c), b.entry(c)
			e3 := b.entry(c)
			b.commit()
			f := b.fork(c, e2)
			b.commit()
			s := b.summary(c, e3)
			e5 := b.entry(c)
			b.commit()
			g := b.entry(f)
			b.commit()
			return []expectation{
				expectHead(f, 0, 0),
				expectContext(f, 0, e1, e2, g),
				expectHead(c, 0, s),
				expectContext(c, 0, s, e3, e5),
				expectContext(c, e3, e1, e2, e3),
				expectTranscript(f, e1, e2, g),
			}
		}},
		{"nested source cutoffs", func(b *builder) []expectation {
			c := b.conv()
			e1 := b.entry(c)
			b.set(rvA(c), "a")
			b.app(rlA(c), "l1")
			e2 := b.entry(c)
			b.commit()
			b.set(rvA(c), "b")
			b.app(rlA(c), "l2")
			e3 := b.entry(c)
			b.commit()
			f1 := b.fork(c, e3)
			b.commit()
			e4 := b.entry(f1)
			b.set(rvA(f1), "f1")
			b.commit()
			f2 := b.fork(f1, e2) // an entry f1 inherits
			b.commit()
			h := b.summary(c, e2)
			b.set(rvA(c), "c-late")
			b.commit()
			f3 := b.fork(f2, e1) // deeper still
			b.commit()
			return []expectation{
				expectTranscript(f1, e1, e2, e3, e4),
				expectTranscript(f2, e1, e2),
				expectTranscript(f3, e1),
				expectValue(rvA(f2), 0, "a"),
				expectValue(rvA(f1), 0, "f1"),
				expectValue(rvA(f1), e3, "b"),
				expectValue(rvA(f3), 0, ""),
				expectList(rlA(f2), 0, "l1"),
				expectList(rlA(f1), 0, "l1", "l2"),
				expectList(rlA(f3), 0),
				expectHead(f2, 0, 0),
				expectHead(c, 0, h),
			}
		}},
		{"sticky state untouched by historical reads", func(b *builder) []expectation {
			c := b.conv()
			b.set(svA(c), "s1")
			b.set(rvA(c), "r1")
			e1 := b.entry(c)
			b.commit()
			b.set(svA(c), "s2")
			b.set(rvA(c), "r2")
			e2 := b.entry(c)
			b.commit()
			f := b.fork(c, e1)
			b.commit()
			return []expectation{
				expectSequence("historical reads, then sticky",
					expectValue(svA(c), 0, "s2"),
					expectValue(rvA(c), e1, "r1"),
					expectValue(rvA(c), e2, "r2"),
					expectHistoricalError(svA(c), e1),
					expectValue(svA(c), 0, "s2"),
					expectValue(rvA(f), 0, "r1"),
					expectValue(svA(f), 0, ""),
					expectValue(svA(c), 0, "s2"),
				),
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			x := openTrio(t, ctx, t.TempDir())
			defer x.close()
			b := &builder{next: 1}
			exps := tc.build(b)
			b.commit()
			for i, batch := range b.batches {
				if !x.commit(t, batch) {
					t.Fatalf("batch %d rejected by memory: %s", i, dump(batch))
				}
			}
			x.reopen(t)
			for _, o := range []struct {
				name string
				s    storage.Storage
			}{{"memory", x.mem}, {"jsonl", x.jl}, {"sqlite", x.sq}} {
				for _, e := range exps {
					got, err := e.read(ctx, o.s)
					if err != nil {
						t.Errorf("%s: %s: %v", o.name, e.what, err)
						continue
					}
					if d := cmp.Diff(e.want, got, cmpOpts...); d != "" {
						t.Errorf("%s: %s (-want +got):\n%s", o.name, e.what, d)
					}
				}
			}
			compare(t, x, "deep fork "+tc.name)
		})
	}
}
