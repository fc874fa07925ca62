package storagetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/pico-go/pico/storage"
)

// The property's state lives in a few namespaces with fixed policies, so a
// valid history never changes a policy; two keys each keep collisions
// frequent.
const (
	nsRewindValue = "prop.rv"
	nsStickyValue = "prop.sv"
	nsRewindList  = "prop.rl"
	nsStickyList  = "prop.sl"
	nsSession     = "prop.session"

	propBatchesMin = 4 // batches per history
	propBatchesMax = 24
	propWritesMax  = 8  // writes per batch
	propQueriesMax = 30 // random reads after the full sweep
)

var (
	propKinds     = []string{"user", "assistant", "tool_result", "summary"}
	propEntryKeys = []string{"", "", "call-1", "call-2"}
	propStateKeys = []string{"a", "b"}

	// propWrites weights the kinds of valid write the generator draws.
	propWrites = []string{
		"conversation", "fork", "fork",
		"entry", "entry", "entry", "entry", "entry", "entry",
		"rv.set", "rv.set", "rv.delete", "sv.set", "sv.delete", "session.set", "session.delete",
		"rl.append", "rl.append", "rl.append", "rl.append", "rl.remove", "rl.remove", "rl.remove", "rl.clear",
		"sl.append", "sl.append", "sl.remove", "sl.remove", "sl.clear",
		"deleteConversation",
	}
)

func convAddr(ns string, policy storage.Policy, conv ID, key string) storage.Address {
	return storage.Address{Scope: storage.ConversationScope(conv), Namespace: ns, Key: key, Rewind: bool(policy)}
}

func sessionAddr(key string) storage.Address {
	return storage.Address{Scope: storage.SessionScope(), Namespace: nsSession, Key: key}
}

// testProperty: random valid histories with forks (and the odd invalid
// batch) read the same through the backend as through the brute-force model.
func testProperty(t *testing.T, open Opener) {
	rapid.Check(t, func(rt *rapid.T) {
		s := &store{Storage: open(t), t: rt, ctx: rt.Context()}
		defer func() { _ = s.Close(context.Background()) }()
		g := &generator{t: rt}
		batches := rapid.IntRange(propBatchesMin, propBatchesMax).Draw(rt, "batches")
		for range batches {
			g.batch(s)
		}
		g.checkAll(s)
		queries := rapid.IntRange(1, propQueriesMax).Draw(rt, "queries")
		for range queries {
			g.checkRandomRead(s)
		}
	})
}

// generator draws valid batches against the model and commits them.
type generator struct {
	t     *rapid.T
	ops   history // committed writes, then the writes of the batch being built
	start int     // index in ops of the batch's first write
	last  ID      // last committed sequence
}

func pick[T any](t *rapid.T, label string, xs []T) T {
	return xs[rapid.IntRange(0, len(xs)-1).Draw(t, label)]
}

// seq is the sequence the next write of the batch gets.
func (g *generator) seq() ID { return g.last + 1 + ID(len(g.ops)-g.start) }

// committed reports whether a conversation was created before this batch.
func (g *generator) committed(conv ID) bool { return conv < g.last+1 }

// live is every conversation that exists now, this batch included.
func (g *generator) live() []ID {
	var out []ID
	for _, o := range g.ops {
		if o.w.Type == storage.WriteCreateConversation && !g.ops.deleted(o.w.Conversation.ID) {
			out = append(out, o.w.Conversation.ID)
		}
	}
	return out
}

// batch draws one batch, sometimes first commits a copy with an invalid write
// spliced in and checks that it is rejected without effect, then commits the
// valid batch.
func (g *generator) batch(s *store) {
	rt := g.t
	g.start = len(g.ops)
	first := g.last + 1
	n := rapid.IntRange(0, propWritesMax).Draw(rt, "writes")
	for range n {
		seq := g.seq()
		g.ops = append(g.ops, op{seq, g.drawWrite(seq)})
	}
	writes := make([]storage.Write, n)
	for i, o := range g.ops[g.start:] {
		writes[i] = o.w
	}

	if rapid.IntRange(0, 7).Draw(rt, "invalid") == 0 {
		at := rapid.IntRange(0, n).Draw(rt, "invalidAt")
		full := g.ops
		g.ops = full[:g.start+at]
		bad := g.drawInvalid(first + ID(at))
		g.ops = full
		batch := storage.CommitBatch{Kind: storage.BatchMain, Writes: append(slices.Clone(writes[:at]), bad)}
		rt.Logf("rejected batch from %d: %s", first, dump(batch.Writes))
		_, err := s.Commit(s.ctx, batch)
		var be *storage.BatchError
		if !errors.As(err, &be) || be.Index != at {
			rt.Fatalf("batch with invalid write %d: Commit error = %v; want a *storage.BatchError at index %d", at, err, at)
		}
		if got := s.LastSeq(); got != g.last {
			rt.Fatalf("LastSeq() after a rejected batch = %d; want %d", got, g.last)
		}
	}

	rt.Logf("batch from %d: %s", first, dump(writes))
	r, err := s.Commit(s.ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: writes})
	if err != nil {
		rt.Fatalf("Commit of a valid batch: %v", err)
	}
	if want := (storage.Range{First: first, Last: first + ID(n) - 1}); r != want {
		rt.Fatalf("Commit range = %+v; want %+v", r, want)
	}
	g.last += ID(n)
}

func dump(ws []storage.Write) string {
	b, err := json.Marshal(ws)
	if err != nil {
		return fmt.Sprintf("%+v", ws)
	}
	return string(b)
}

// drawWrite draws a write that is valid after everything in g.ops. Where the
// drawn kind is impossible (no conversation to write to, nothing to
// remove), it falls back to creating a conversation or appending.
func (g *generator) drawWrite(seq ID) storage.Write {
	rt := g.t
	live := g.live()
	if len(live) == 0 {
		return storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: seq}}
	}
	// Half the writes go to the newest conversation, which is often a fork,
	// so that forks get local writes that shadow, delete, remove and clear
	// what they inherit.
	conv := live[len(live)-1]
	if rapid.Bool().Draw(rt, "anyConv") {
		conv = pick(rt, "conv", live)
	}
	// State mostly uses one key, so that forks inherit what they shadow,
	// delete, remove and clear, and lists grow long enough to remove from.
	key := propStateKeys[0]
	if rapid.IntRange(0, 3).Draw(rt, "otherKey") == 0 {
		key = pick(rt, "key", propStateKeys)
	}
	value := js(fmt.Sprintf("v%d", seq))
	rewindList := convAddr(nsRewindList, storage.Rewind, conv, key)
	stickyList := convAddr(nsStickyList, storage.Sticky, conv, key)
	switch pick(rt, "write", propWrites) {
	case "conversation":
		return storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: seq}}
	case "fork":
		if w, ok := g.drawFork(seq); ok {
			return w
		}
		return storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: seq}}
	case "entry":
		return g.drawEntry(seq, conv)
	case "rv.set":
		return storage.Write{Type: storage.WriteValueSet, Addr: addrPtr(convAddr(nsRewindValue, storage.Rewind, conv, key)), Value: value}
	case "rv.delete":
		return storage.Write{Type: storage.WriteValueDelete, Addr: addrPtr(convAddr(nsRewindValue, storage.Rewind, conv, key))}
	case "sv.set":
		return storage.Write{Type: storage.WriteValueSet, Addr: addrPtr(convAddr(nsStickyValue, storage.Sticky, conv, key)), Value: value}
	case "sv.delete":
		return storage.Write{Type: storage.WriteValueDelete, Addr: addrPtr(convAddr(nsStickyValue, storage.Sticky, conv, key))}
	case "session.set":
		return storage.Write{Type: storage.WriteValueSet, Addr: addrPtr(sessionAddr(key)), Value: value}
	case "session.delete":
		return storage.Write{Type: storage.WriteValueDelete, Addr: addrPtr(sessionAddr(key))}
	case "rl.remove":
		if w, ok := g.drawRemove(nsRewindList, storage.Rewind); ok {
			return w
		}
		return storage.Write{Type: storage.WriteListAppend, Addr: addrPtr(rewindList), Value: value}
	case "rl.clear":
		return storage.Write{Type: storage.WriteListClear, Addr: addrPtr(rewindList)}
	case "sl.append":
		return storage.Write{Type: storage.WriteListAppend, Addr: addrPtr(stickyList), Value: value}
	case "sl.remove":
		if w, ok := g.drawRemove(nsStickyList, storage.Sticky); ok {
			return w
		}
		return storage.Write{Type: storage.WriteListAppend, Addr: addrPtr(stickyList), Value: value}
	case "sl.clear":
		return storage.Write{Type: storage.WriteListClear, Addr: addrPtr(stickyList)}
	case "deleteConversation":
		if rapid.IntRange(0, 5).Draw(rt, "reallyDelete") == 0 {
			return storage.Write{Type: storage.WriteDeleteConversation, ID: conv}
		}
		return g.drawEntry(seq, conv)
	}
	// "rl.append"
	return storage.Write{Type: storage.WriteListAppend, Addr: addrPtr(rewindList), Value: value}
}

// drawFork forks a conversation created before this batch at an entry of
// its logical transcript: a committed one, or one this batch wrote to the
// source itself. (The batch check consults committed state for anything
// else, so forks of conversations created in the same batch, or at entries
// they inherit, are left out.)
func (g *generator) drawFork(seq ID) (storage.Write, bool) {
	var sources []ID
	for _, c := range g.live() {
		if g.committed(c) {
			sources = append(sources, c)
		}
	}
	if len(sources) == 0 {
		return storage.Write{}, false
	}
	// Half the forks fork the newest conversation, so chains grow deep.
	source := sources[len(sources)-1]
	if rapid.Bool().Draw(g.t, "anySource") {
		source = pick(g.t, "forkSource", sources)
	}
	points := []ID{0} // the start of the transcript
	for _, e := range g.ops.transcript(source) {
		if e.ID <= g.last || e.ConversationID == source {
			points = append(points, e.ID)
		}
	}
	at := pick(g.t, "forkAt", points)
	return storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{
		ID: seq, Parent: &storage.ParentRef{ConversationID: source, At: at},
	}}, true
}

func (g *generator) drawEntry(seq, conv ID) storage.Write {
	rt := g.t
	e := &storage.Entry{ID: seq, ConversationID: conv, Kind: pick(rt, "kind", propKinds), Key: pick(rt, "entryKey", propEntryKeys)}
	switch rapid.IntRange(0, 9).Draw(rt, "head") {
	case 0, 1:
		e.Head = seq // a reset or handoff: the context starts here
	case 2:
		if tr := g.ops.transcript(conv); len(tr) > 0 {
			e.Head = pick(rt, "headAt", tr).ID // a summary keeping an earlier entry
		}
	}
	if rapid.IntRange(0, 3).Draw(rt, "data") == 0 {
		e.Data = js(map[string]ID{"n": seq})
	}
	if seq > 1 && rapid.IntRange(0, 7).Draw(rt, "edit") == 0 {
		e.Edits = []storage.ContextEdit{{Target: ID(rapid.IntRange(1, int(seq)-1).Draw(rt, "editTarget")), Action: storage.EditOmit}}
	}
	return storage.Write{Type: storage.WriteEntry, Entry: e}
}

// drawRemove removes an element visible now in any list of a namespace. In
// a conversation created in this batch only the batch's own appends
// qualify, for the same reason as in drawFork.
func (g *generator) drawRemove(ns string, policy storage.Policy) (storage.Write, bool) {
	var removes []storage.Write
	for _, conv := range g.live() {
		for _, key := range propStateKeys {
			a := convAddr(ns, policy, conv, key)
			for _, e := range g.ops.list(a, 0) {
				if g.committed(conv) || g.appendedTo(e.ID) == conv {
					removes = append(removes, storage.Write{Type: storage.WriteListRemove, Addr: addrPtr(a), Element: e.ID})
				}
			}
		}
	}
	if len(removes) == 0 {
		return storage.Write{}, false
	}
	return pick(g.t, "remove", removes), true
}

func (g *generator) appendedTo(element ID) ID {
	for _, o := range g.ops {
		if o.seq == element {
			return o.w.Addr.Scope.ID
		}
	}
	return 0
}

// drawInvalid draws a write that breaks one rule of storage.CheckBatch after
// everything in g.ops.
func (g *generator) drawInvalid(seq ID) storage.Write {
	rt := g.t
	live := g.live()
	conv := seq + 1000 // never a conversation
	if len(live) > 0 {
		conv = pick(rt, "conv", live)
	}
	badEntry := storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: seq + 1, ConversationID: conv, Kind: "user"}}
	switch rapid.IntRange(0, 5).Draw(rt, "invalidWrite") {
	case 1: // a fork at a conversation's own id, which is never an entry
		if g.committed(conv) && len(live) > 0 {
			return storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{
				ID: seq, Parent: &storage.ParentRef{ConversationID: conv, At: conv},
			}}
		}
	case 2: // the other rewind policy for existing state
		a := convAddr(nsRewindValue, storage.Rewind, conv, pick(rt, "key", propStateKeys))
		if g.ops.stateExists(a) {
			a.Rewind = false
			return storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: js("x")}
		}
	case 3: // removing an element that is not in the list
		if len(live) > 0 {
			a := convAddr(nsRewindList, storage.Rewind, conv, pick(rt, "key", propStateKeys))
			return storage.Write{Type: storage.WriteListRemove, Addr: &a, Element: conv}
		}
	case 4: // an entry in a conversation that does not exist
		return storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: seq, ConversationID: seq + 1000, Kind: "user"}}
	case 5: // a value that is not JSON
		if len(live) > 0 {
			a := convAddr(nsRewindValue, storage.Rewind, conv, pick(rt, "key", propStateKeys))
			return storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: json.RawMessage(`{"unterminated":`)}
		}
	}
	return badEntry // an entry whose id is not its sequence
}

// checkAll compares everything the model can name with the backend: every
// conversation's record, whole transcript, newest head and current state.
func (g *generator) checkAll(s *store) {
	rt := g.t
	h := g.ops
	if got := s.LastSeq(); got != g.last {
		rt.Fatalf("LastSeq() = %d; want %d", got, g.last)
	}
	var ids []ID
	for id := ID(1); id <= g.last+1; id++ {
		ids = append(ids, id)
	}
	convs := h.conversations()
	diff(rt, "GetConversations", convs, s.getConversations(ids...))
	var live []ID
	for id := range convs {
		live = append(live, id)
	}
	slices.Sort(live)
	diff(rt, "ScanConversations", live, conversationIDs(s.scanConversations(storage.ConversationQuery{Cursor: all}).Items))
	kinds, err := s.EntryKinds(s.ctx)
	if err != nil {
		rt.Fatalf("EntryKinds: %v", err)
	}
	diff(rt, "EntryKinds", h.kinds(), kinds)

	for _, c := range live {
		q := storage.EntryQuery{Cursor: all, ConversationID: c}
		diff(rt, fmt.Sprintf("transcript of %d", c), modelPage(h.entryQuery(q), entryOf, q.Cursor, g.last), s.scanEntries(q))
		g.checkNewestHead(s, c, 0)
		own := map[ID]*storage.Entry{}
		var ownIDs []ID
		for _, e := range h.transcript(c) {
			if e.ConversationID == c {
				own[e.ID] = e
				ownIDs = append(ownIDs, e.ID)
			}
		}
		diff(rt, fmt.Sprintf("GetEntries of %d's own entries", c), own, s.getEntries(ownIDs...))
		for _, key := range propStateKeys {
			g.checkValue(s, convAddr(nsRewindValue, storage.Rewind, c, key), 0)
			g.checkValue(s, convAddr(nsStickyValue, storage.Sticky, c, key), 0)
			g.checkList(s, convAddr(nsRewindList, storage.Rewind, c, key), storage.ListQuery{Cursor: all})
			g.checkList(s, convAddr(nsStickyList, storage.Sticky, c, key), storage.ListQuery{Cursor: all})
		}
		g.checkScanValues(s, storage.ConversationScope(c), nsRewindValue, storage.Rewind)
		g.checkScanValues(s, storage.ConversationScope(c), nsStickyValue, storage.Sticky)
	}
	for _, key := range propStateKeys {
		g.checkValue(s, sessionAddr(key), 0)
	}
	g.checkScanValues(s, storage.SessionScope(), nsSession, storage.Sticky)
}

func entryOf(e *storage.Entry) ID { return e.ID }

func elementOf(e storage.Element) ID { return e.ID }

// diff fails the check with a go-cmp diff when got is not want.
func diff(rt *rapid.T, what string, want, got any) {
	rt.Helper()
	if d := cmp.Diff(want, got, cmpOpts...); d != "" {
		rt.Fatalf("%s differs from the model (-want +got):\n%s", what, d)
	}
}

func (g *generator) checkNewestHead(s *store, conv, at ID) {
	g.t.Helper()
	got, ok, err := s.NewestHead(s.ctx, conv, at)
	if err != nil {
		g.t.Fatalf("NewestHead(%d, %d): %v", conv, at, err)
	}
	want := g.ops.newestHead(conv, at)
	if ok != (want != nil) {
		g.t.Fatalf("NewestHead(%d, %d) found = %v; want %v", conv, at, ok, want != nil)
	}
	if ok {
		diff(g.t, fmt.Sprintf("NewestHead(%d, %d)", conv, at), want, got)
	}
}

type versionRead struct {
	Version storage.Version
	OK      bool
}

func (g *generator) checkValue(s *store, a storage.Address, at ID) {
	g.t.Helper()
	v, ok, err := s.GetValue(s.ctx, a, at)
	if err != nil {
		g.t.Fatalf("GetValue(%s, %d): %v", a, at, err)
	}
	want, wantOK := g.ops.value(a, at)
	diff(g.t, fmt.Sprintf("GetValue(%s, %d)", a, at), versionRead{want, wantOK}, versionRead{v, ok})
}

func (g *generator) checkList(s *store, a storage.Address, q storage.ListQuery) {
	g.t.Helper()
	want := modelPage(g.ops.list(a, q.At), elementOf, q.Cursor, g.last)
	diff(g.t, fmt.Sprintf("ReadList(%s, %+v)", a, q), want, s.readList(a, q))
}

// checkScanValues pages through a namespace one key at a time, continuing
// after the last key, and compares with the model's current values.
func (g *generator) checkScanValues(s *store, scope storage.Scope, ns string, policy storage.Policy) {
	g.t.Helper()
	var want []storage.KeyedVersion
	for _, key := range propStateKeys { // sorted
		a := storage.Address{Scope: scope, Namespace: ns, Key: key, Rewind: bool(policy)}
		if v, ok := g.ops.value(a, 0); ok {
			want = append(want, storage.KeyedVersion{Key: key, Version: v})
		}
	}
	var got []storage.KeyedVersion
	q := storage.ValueQuery{Scope: scope, Namespace: ns, Limit: 1}
	for range len(want) + 1 {
		p := s.scanValues(q)
		got = append(got, p.Items...)
		if more := len(got) < len(want); (p.Next != 0) != more {
			g.t.Fatalf("ScanValues(%+v): Next = %d after %d of %d values", q, p.Next, len(got), len(want))
		}
		if p.Next == 0 || len(p.Items) == 0 {
			break
		}
		q.After = p.Items[len(p.Items)-1].Key
	}
	diff(g.t, fmt.Sprintf("ScanValues(%s %q)", scope, ns), want, got)
}

// checkRandomRead draws one read of a random conversation at a random
// position with a random cursor and compares it with the model.
func (g *generator) checkRandomRead(s *store) {
	rt := g.t
	var live []ID
	for id := range g.ops.conversations() {
		live = append(live, id)
	}
	if len(live) == 0 {
		return
	}
	slices.Sort(live)
	conv := pick(rt, "readConv", live)
	at := ID(rapid.IntRange(0, int(g.last)+1).Draw(rt, "readAt"))
	key := pick(rt, "readKey", propStateKeys)
	switch rapid.IntRange(0, 4).Draw(rt, "read") {
	case 0:
		g.checkNewestHead(s, conv, at)
	case 1:
		g.checkValue(s, convAddr(nsRewindValue, storage.Rewind, conv, key), at)
	case 2:
		g.checkList(s, convAddr(nsRewindList, storage.Rewind, conv, key), storage.ListQuery{Cursor: g.drawCursor(), At: at})
	case 3:
		q := g.drawEntryQuery(conv)
		q.Cursor = g.drawCursor()
		diff(rt, fmt.Sprintf("ScanEntries(%+v)", q), modelPage(g.ops.entryQuery(q), entryOf, q.Cursor, g.last), s.scanEntries(q))
	case 4:
		g.checkEntryWalk(s, conv)
	}
}

func (g *generator) drawCursor() storage.Cursor {
	rt := g.t
	c := storage.Cursor{Limit: rapid.IntRange(1, 5).Draw(rt, "limit")}
	bound := func(label string) ID { return ID(rapid.IntRange(1, int(g.last)+1).Draw(rt, label)) }
	switch rapid.IntRange(0, 3).Draw(rt, "cursor") {
	case 1:
		c.After = bound("after")
	case 2:
		c.Before = bound("before")
	case 3:
		c.After, c.Before = bound("after"), bound("before")
	}
	return c
}

func (g *generator) drawEntryQuery(conv ID) storage.EntryQuery {
	rt := g.t
	q := storage.EntryQuery{ConversationID: conv}
	if rapid.IntRange(0, 2).Draw(rt, "byKind") == 0 {
		q.Kind = pick(rt, "queryKind", propKinds)
	}
	if rapid.IntRange(0, 2).Draw(rt, "byKey") == 0 {
		q.Key = pick(rt, "queryKey", propEntryKeys[2:])
	}
	if rapid.IntRange(0, 2).Draw(rt, "byRange") == 0 {
		q.From = ID(rapid.IntRange(1, int(g.last)+1).Draw(rt, "from"))
		q.Through = ID(rapid.IntRange(int(q.From), int(g.last)+1).Draw(rt, "through"))
	}
	return q
}

// checkEntryWalk pages through a whole (filtered) transcript forward or
// backward, following Next, and compares the pages' concatenation.
func (g *generator) checkEntryWalk(s *store, conv ID) {
	rt := g.t
	q := g.drawEntryQuery(conv)
	want := entryIDs(g.ops.entryQuery(q))
	q.Limit = rapid.IntRange(1, 4).Draw(rt, "walkLimit")
	backward := rapid.Bool().Draw(rt, "backward")
	if backward {
		q.Before = g.last + 1
	}
	var got []ID
	for range len(want) + 2 {
		p := s.scanEntries(q)
		if backward {
			got = append(entryIDs(p.Items), got...)
			q.Before = p.Next
		} else {
			got = append(got, entryIDs(p.Items)...)
			q.After = p.Next
		}
		if p.Next == 0 {
			break
		}
	}
	diff(rt, fmt.Sprintf("walk of %d (%+v, backward %v)", conv, q, backward), want, got)
}
