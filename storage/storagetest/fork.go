package storagetest

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/storage"
)

// forkTests are forks at the storage level (reference §2.4, §4.4, §7.2):
// shared history, capped at the fork point, never future changes.
var forkTests = []test{
	{"AForkReadsItsSourceThroughTheForkPointThenItsOwnEntries", testForkTranscript},
	{"NewestHeadInAForkIgnoresHeadsTheSourceAddsLater", testForkNewestHead},
	{"AForkReadsRewindableStateOfItsSourceCappedAtTheForkPoint", testForkState},
	{"AForkDoesNotInheritStickyState", testForkSticky},
	{"NestedForksApplyTheSmallestCutoff", testNestedForks},
	{"AChainOfFiftyForksReadsCorrectly", testForkChain},
	{"AForkAtAnEntryItsSourceCannotSeeRejects", testForkAtInvisibleEntry},
	{"ADeletedConversationIsHiddenButItsForksStillReadItsPrefix", testDeletedSource},
	{"ScanConversationsListsForksAndOwnedConversations", testForkAndOwnerScans},
	{"ScanValuesOfAForkIncludesInheritedRewindableValues", testForkScanValues},
	{"AForkCreatedInABatchCanBeForkedAndEditedInTheSameBatch", testForkInOneBatch},
	{"ReadsFollowTheStoredRewindPolicy", testReadsFollowStoredPolicy},
}

// testForkInOneBatch: a batch may create a fork, fork that fork at an
// inherited entry, and remove an inherited list element in it, all before
// anything is committed.
func testForkInOneBatch(t *testing.T, open Opener) {
	s := newStore(t, open)
	moves := storage.ConversationList[string]("test.moves", storage.Rewind)
	x := s.tx()
	a := x.conversation()
	e := x.entry(a, "user")
	m1 := x.push(moves.In(a).Address, "m1")
	m2 := x.push(moves.In(a).Address, "m2")
	at := x.entry(a, "assistant")
	x.commit()

	x = s.tx()
	b := x.fork(a, at)
	c := x.fork(b, e) // b is not committed yet; e is inherited from a
	x.remove(moves.In(b).Address, m1)
	x.commit()
	if got := s.list(moves.In(b).Address, 0); !cmp.Equal(got, []string{"m2"}) {
		t.Errorf("fork list after removing an inherited element = %q; want [m2]", got)
	}
	if got := s.list(moves.In(c).Address, 0); len(got) != 0 {
		t.Errorf("fork of a fork at %d sees moves %q; want none (appended after %d)", e, got, e)
	}
	_ = m2
}

// testReadsFollowStoredPolicy: reading rewindable state through a sticky
// address still sees its current contents, deletes and clears included.
func testReadsFollowStoredPolicy(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	rv := storage.ConversationValue[string]("test.policy", storage.Rewind).In(c).Address
	rl := storage.ConversationList[string]("test.policyList", storage.Rewind).In(c).Address
	x.set(rv, "v1")
	x.set(rv, "v2")
	x.push(rl, "old")
	x.clear(rl)
	x.push(rl, "new")
	x.commit()
	sticky, stickyList := rv, rl
	sticky.Rewind, stickyList.Rewind = false, false
	if got := s.str(sticky, 0); got != "v2" {
		t.Errorf("current value through a sticky address = %q; want v2", got)
	}
	if got := s.list(stickyList, 0); !cmp.Equal(got, []string{"new"}) {
		t.Errorf("list through a sticky address = %q; want [new]", got)
	}
	x = s.tx()
	x.del(rv)
	x.commit()
	if _, ok, err := s.GetValue(s.ctx, sticky, 0); ok || err != nil {
		t.Errorf("deleted value through a sticky address: found=%v err=%v; want absent", ok, err)
	}
}

// testForkTranscript is §2.4's picture:
//
//	A: 10 ─ 20 ─ 30 ─ 40 ─ 50 ─ 70
//	          └──────────── 90 ─ 100     B, forked at 20
func testForkTranscript(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	a := x.conversation()
	for _, id := range []ID{10, 20, 30, 40, 50} {
		x.padTo(id).entry(a, "user")
	}
	b := x.padTo(60).fork(a, 20)
	x.padTo(70).entry(a, "assistant")
	x.padTo(90).entry(b, "user")
	x.padTo(100).entry(b, "assistant")
	x.commit()

	if got, want := s.transcript(b), []ID{10, 20, 90, 100}; !cmp.Equal(got, want) {
		t.Errorf("transcript(B) = %v; want %v", got, want)
	}
	if got, want := s.transcript(a), []ID{10, 20, 30, 40, 50, 70}; !cmp.Equal(got, want) {
		t.Errorf("transcript(A) = %v; want %v", got, want)
	}
	for _, tc := range []struct {
		name     string
		q        storage.EntryQuery
		want     []ID
		wantNext ID
	}{
		{"range across the fork point", storage.EntryQuery{From: 20, Through: 90}, []ID{20, 90}, 0},
		{"range of source ids past the fork point", storage.EntryQuery{From: 30, Through: 70}, nil, 0},
		{"forward across the fork point", storage.EntryQuery{Cursor: storage.Cursor{After: 10, Limit: 2}}, []ID{20, 90}, 90},
		{"backward across the fork point", storage.EntryQuery{Cursor: storage.Cursor{Before: 100, Limit: 2}}, []ID{20, 90}, 20},
		{"backward from a source id past the fork point", storage.EntryQuery{Cursor: storage.Cursor{Before: 50, Limit: 5}}, []ID{10, 20}, 0},
	} {
		q := tc.q
		q.ConversationID = b
		if q.Limit == 0 {
			q.Limit = storage.PageLimitMax
		}
		p := s.scanEntries(q)
		if got := entryIDs(p.Items); !cmp.Equal(got, tc.want, cmpOpts...) || p.Next != tc.wantNext {
			t.Errorf("%s: page of B = %v next %d; want %v next %d", tc.name, got, p.Next, tc.want, tc.wantNext)
		}
	}
}

func testForkNewestHead(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	a := x.conversation()
	x.padTo(10).entry(a, "user")
	x.padTo(20).head(a, "summary", 10)
	x.padTo(30).entry(a, "user")
	b := x.padTo(40).fork(a, 30)
	x.padTo(50).head(a, "reset", 50)
	x.commit()

	if got := s.newestHead(a, 0); got != 50 {
		t.Errorf("newest head of the source = %d; want 50", got)
	}
	if got := s.newestHead(b, 0); got != 20 {
		t.Errorf("newest head of the fork = %d; want 20, not the source's later 50", got)
	}
	x = s.tx()
	x.padTo(70).head(b, "handoff", 70)
	x.commit()
	for at, want := range map[ID]ID{0: 70, 70: 70, 65: 20, 20: 20, 19: 0} {
		if got := s.newestHead(b, at); got != want {
			t.Errorf("newest head of the fork at %d = %d; want %d", at, got, want)
		}
	}
}

func testForkState(t *testing.T, open Opener) {
	s := newStore(t, open)
	value := storage.ConversationValue[string]("test.value", storage.Rewind)
	list := storage.ConversationList[string]("test.list", storage.Rewind)
	x := s.tx()
	a := x.conversation()
	x.set(value.In(a).Address, "a1")
	x1 := x.push(list.In(a).Address, "x1")
	e1 := x.entry(a, "user")
	x.set(value.In(a).Address, "a2")
	x.push(list.In(a).Address, "x2")
	e2 := x.entry(a, "user")
	x.commit()
	x = s.tx()
	b := x.fork(a, e2)
	x.set(value.In(a).Address, "a3")
	x.push(list.In(a).Address, "x3")
	x.clear(list.In(a).Address)
	x.entry(a, "user")
	x.commit()

	check := func(step string, conv, at ID, wantValue string, wantList []string) {
		t.Helper()
		if got := s.str(value.In(conv).Address, at); got != wantValue {
			t.Errorf("%s: value of %d at %d = %q; want %q", step, conv, at, got, wantValue)
		}
		if got := s.list(list.In(conv).Address, at); !cmp.Equal(got, wantList) {
			t.Errorf("%s: list of %d at %d = %q; want %q", step, conv, at, got, wantList)
		}
	}
	check("source now", a, 0, "a3", []string{})
	check("source at the fork point", a, e2, "a2", []string{"x1", "x2"})
	check("fork now", b, 0, "a2", []string{"x1", "x2"})
	check("fork before the fork point", b, e1, "a1", []string{"x1"})

	x = s.tx()
	x.set(value.In(b).Address, "b1")
	x.remove(list.In(b).Address, x1)
	shadowed := x.entry(b, "user")
	x.commit()
	check("a local write shadows; a local remove hides an inherited element", b, 0, "b1", []string{"x2"})
	check("before the local writes", b, e2, "a2", []string{"x1", "x2"})
	check("the source is untouched", a, e2, "a2", []string{"x1", "x2"})

	x = s.tx()
	x.del(value.In(b).Address)
	x.clear(list.In(b).Address)
	x.push(list.In(b).Address, "y1")
	x.entry(b, "user")
	x.commit()
	check("a local delete and clear hide the inherited state", b, 0, absent, []string{"y1"})
	check("before the local delete and clear", b, shadowed, "b1", []string{"x2"})
}

func testForkSticky(t *testing.T, open Opener) {
	s := newStore(t, open)
	sticky := storage.ConversationValue[string]("ui.expanded", storage.Sticky)
	inbox := storage.ConversationList[string]("pi.inbox", storage.Sticky)
	session := storage.SessionValue[string]("pi.session.name").Address
	x := s.tx()
	a := x.conversation()
	x.set(sticky.In(a).Address, "yes")
	x.push(inbox.In(a).Address, "queued")
	x.set(session, "shared")
	e := x.entry(a, "user")
	b := x.fork(a, e)
	x.commit()

	if got := s.str(sticky.In(b).Address, 0); got != absent {
		t.Errorf("sticky value in the fork = %q; want absent", got)
	}
	if got := s.list(inbox.In(b).Address, 0); len(got) != 0 {
		t.Errorf("sticky list in the fork = %q; want []", got)
	}
	if got := s.str(sticky.In(a).Address, 0); got != "yes" {
		t.Errorf("sticky value in the source = %q; want %q", got, "yes")
	}
	if got := s.str(session, 0); got != "shared" {
		t.Errorf("session value = %q; want %q", got, "shared")
	}
}

// testNestedForks: A ← B (at a4) ← C (at a2, an inherited entry), B ← D (at
// b1) ← E (at a3). Each fork sees the smallest cutoff on its path.
func testNestedForks(t *testing.T, open Opener) {
	s := newStore(t, open)
	value := storage.ConversationValue[string]("test.value", storage.Rewind)
	list := storage.ConversationList[string]("test.list", storage.Rewind)
	x := s.tx()
	a := x.conversation()
	var ae []ID
	for i := 1; i <= 5; i++ {
		x.set(value.In(a).Address, fmt.Sprintf("a%d", i))
		x.push(list.In(a).Address, fmt.Sprintf("a%d", i))
		ae = append(ae, x.entry(a, "user"))
	}
	x.commit()
	x = s.tx()
	b := x.fork(a, ae[3])
	x.set(value.In(b).Address, "b1")
	x.push(list.In(b).Address, "b1")
	b1 := x.entry(b, "user")
	b2 := x.entry(b, "user")
	x.commit()
	x = s.tx()
	c := x.fork(b, ae[1])
	c1 := x.entry(c, "user")
	d := x.fork(b, b1)
	d1 := x.entry(d, "user")
	x.commit()
	x = s.tx()
	e := x.fork(d, ae[2])
	e1 := x.entry(e, "user")
	x.commit()

	for _, tc := range []struct {
		name       string
		conv       ID
		transcript []ID
		value      string
		list       []string
	}{
		{"B", b, []ID{ae[0], ae[1], ae[2], ae[3], b1, b2}, "b1", []string{"a1", "a2", "a3", "a4", "b1"}},
		{"C", c, []ID{ae[0], ae[1], c1}, "a2", []string{"a1", "a2"}},
		{"D", d, []ID{ae[0], ae[1], ae[2], ae[3], b1, d1}, "b1", []string{"a1", "a2", "a3", "a4", "b1"}},
		{"E", e, []ID{ae[0], ae[1], ae[2], e1}, "a3", []string{"a1", "a2", "a3"}},
	} {
		if got := s.transcript(tc.conv); !cmp.Equal(got, tc.transcript) {
			t.Errorf("transcript(%s) = %v; want %v", tc.name, got, tc.transcript)
		}
		if got := s.str(value.In(tc.conv).Address, 0); got != tc.value {
			t.Errorf("value in %s = %q; want %q", tc.name, got, tc.value)
		}
		if got := s.list(list.In(tc.conv).Address, 0); !cmp.Equal(got, tc.list) {
			t.Errorf("list in %s = %q; want %q", tc.name, got, tc.list)
		}
	}
}

// testForkChain forks each conversation from the previous one's newest
// entry, fifty deep; after each fork the source moves on, and the deepest
// fork must see none of that.
func testForkChain(t *testing.T, open Opener) {
	const depth = 50
	s := newStore(t, open)
	value := storage.ConversationValue[string]("test.value", storage.Rewind)
	list := storage.ConversationList[string]("test.list", storage.Rewind)
	x := s.tx()
	conv := x.conversation()
	x.set(value.In(conv).Address, "root")
	x.push(list.In(conv).Address, "root")
	last := x.head(conv, "user", x.next())
	x.commit()

	wantTranscript := []ID{last}
	wantValue, wantList, wantHead := "root", []string{"root"}, last
	var positions []struct {
		at    ID
		value string
	}
	for level := 1; level <= depth; level++ {
		x = s.tx()
		parent := conv
		conv = x.fork(parent, last)
		name := fmt.Sprintf("level %d", level)
		if level%5 == 0 {
			x.set(value.In(conv).Address, name)
			wantValue = name
		}
		if level%7 == 0 {
			x.push(list.In(conv).Address, name)
			wantList = append(wantList, name)
		}
		if level == 25 {
			last = x.head(conv, "summary", last)
			wantHead = last
		} else {
			last = x.entry(conv, "user")
		}
		wantTranscript = append(wantTranscript, last)
		positions = append(positions, struct {
			at    ID
			value string
		}{last, wantValue})
		// The source moves on after the fork; no deeper fork may see it.
		x.set(value.In(parent).Address, "later")
		x.push(list.In(parent).Address, "later")
		x.head(parent, "reset", x.next())
		x.commit()
	}

	if got := s.transcript(conv); !cmp.Equal(got, wantTranscript) {
		t.Errorf("transcript of the deepest fork = %v; want %v", got, wantTranscript)
	}
	if got := s.str(value.In(conv).Address, 0); got != wantValue {
		t.Errorf("value in the deepest fork = %q; want %q", got, wantValue)
	}
	if got := s.list(list.In(conv).Address, 0); !cmp.Equal(got, wantList) {
		t.Errorf("list in the deepest fork = %q; want %q", got, wantList)
	}
	if got := s.newestHead(conv, 0); got != wantHead {
		t.Errorf("newest head in the deepest fork = %d; want %d", got, wantHead)
	}
	for _, p := range positions {
		if got := s.str(value.In(conv).Address, p.at); got != p.value {
			t.Errorf("value in the deepest fork at %d = %q; want %q", p.at, got, p.value)
		}
	}
}

func testForkAtInvisibleEntry(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	a := x.conversation()
	e1 := x.entry(a, "user")
	b := x.fork(a, e1)
	x.commit()
	x = s.tx()
	e2 := x.entry(a, "user") // after B's fork point: not in B's transcript
	x.commit()

	x = s.tx()
	x.fork(b, e2)
	be := x.reject()
	if be.Index != 0 {
		t.Errorf("Index = %d; want 0", be.Index)
	}
	x = s.tx()
	c := x.fork(b, e1) // the inherited entry is a valid fork point
	x.commit()
	if got, want := s.transcript(c), []ID{e1}; !cmp.Equal(got, want) {
		t.Errorf("transcript of a fork at an inherited entry = %v; want %v", got, want)
	}
}

func testDeletedSource(t *testing.T, open Opener) {
	s := newStore(t, open)
	value := storage.ConversationValue[string]("test.value", storage.Rewind)
	list := storage.ConversationList[string]("test.list", storage.Rewind)
	x := s.tx()
	a := x.conversation()
	x.set(value.In(a).Address, "inherited")
	x.push(list.In(a).Address, "inherited")
	h := x.head(a, "reset", x.next())
	e := x.entry(a, "user")
	b := x.fork(a, e)
	own := x.entry(b, "user")
	x.commit()
	x = s.tx()
	x.deleteConversation(a)
	x.commit()

	if got := s.getConversations(a, b); len(got) != 1 || got[b].ID != b {
		t.Errorf("GetConversations(%d, %d) = %v; want only the fork", a, b, got)
	}
	if got := conversationIDs(s.scanConversations(storage.ConversationQuery{Cursor: all}).Items); !cmp.Equal(got, []ID{b}) {
		t.Errorf("ScanConversations = %v; want [%d]", got, b)
	}
	if got, want := s.transcript(b), []ID{h, e, own}; !cmp.Equal(got, want) {
		t.Errorf("transcript of the fork = %v; want %v", got, want)
	}
	if got := s.newestHead(b, 0); got != h {
		t.Errorf("newest head of the fork = %d; want %d", got, h)
	}
	if got := s.str(value.In(b).Address, 0); got != "inherited" {
		t.Errorf("value in the fork = %q; want %q", got, "inherited")
	}
	if got := s.list(list.In(b).Address, 0); !cmp.Equal(got, []string{"inherited"}) {
		t.Errorf("list in the fork = %q; want [inherited]", got)
	}
	x = s.tx()
	x.fork(a, e)
	if be := x.reject(); be.Index != 0 {
		t.Errorf("forking a deleted conversation: Index = %d; want 0", be.Index)
	}
}

func testForkAndOwnerScans(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	cx := x.conversation()
	ex := x.entry(cx, "user")
	cy := x.conversation()
	ey := x.entry(cy, "user")
	tx1 := x.task(cx, "tool")
	ty := x.task(cy, "tool")
	x.commit()
	x = s.tx()
	f1 := x.fork(cx, ex)
	o1 := x.ownedConversation(tx1)
	g := x.fork(cy, ey)
	o2 := x.ownedConversation(ty)
	f2 := x.fork(cx, ex)
	both := x.add(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{
		ID: x.next(), Parent: &storage.ParentRef{ConversationID: cx, At: ex}, Owner: tx1,
	}})
	x.commit()
	x = s.tx()
	grandchild := x.fork(f1, ex)
	x.settle(tx1, "done") // a terminal owner still owns
	x.commit()

	for _, tc := range []struct {
		name     string
		q        storage.ConversationQuery
		want     []ID
		wantNext ID
	}{
		{"forks of X", storage.ConversationQuery{Parent: cx}, []ID{f1, f2, both}, 0},
		{"forks of X, paged", storage.ConversationQuery{Parent: cx, Cursor: storage.Cursor{Limit: 2}}, []ID{f1, f2}, f2},
		{"forks of X, continued", storage.ConversationQuery{Parent: cx, Cursor: storage.Cursor{After: f2, Limit: 2}}, []ID{both}, 0},
		{"forks of a fork", storage.ConversationQuery{Parent: f1}, []ID{grandchild}, 0},
		{"forks of Y", storage.ConversationQuery{Parent: cy}, []ID{g}, 0},
		{"owned from X", storage.ConversationQuery{OwnedFrom: cx}, []ID{o1, both}, 0},
		{"owned from Y", storage.ConversationQuery{OwnedFrom: cy}, []ID{o2}, 0},
		{"forks of X owned from X", storage.ConversationQuery{Parent: cx, OwnedFrom: cx}, []ID{both}, 0},
		{"owned from a conversation without tasks", storage.ConversationQuery{OwnedFrom: f1}, nil, 0},
	} {
		q := tc.q
		if q.Limit == 0 {
			q.Limit = storage.PageLimitMax
		}
		p := s.scanConversations(q)
		if got := conversationIDs(p.Items); !cmp.Equal(got, tc.want, cmpOpts...) || p.Next != tc.wantNext {
			t.Errorf("%s: page = %v next %d; want %v next %d", tc.name, got, p.Next, tc.want, tc.wantNext)
		}
	}
}

func testForkScanValues(t *testing.T, open Opener) {
	s := newStore(t, open)
	rewind := storage.ConversationValue[string]("test.config", storage.Rewind)
	sticky := storage.ConversationValue[string]("test.ui", storage.Sticky)
	x := s.tx()
	a := x.conversation()
	for _, k := range []string{"k1", "k2", "k4"} {
		x.set(rewind.In(a).WithKey(k).Address, "a-"+k)
		x.set(sticky.In(a).WithKey(k).Address, "a-"+k)
	}
	e := x.entry(a, "user")
	b := x.fork(a, e)
	x.set(rewind.In(a).WithKey("k5").Address, "a-k5") // after the fork point
	x.set(rewind.In(b).WithKey("k3").Address, "b-k3")
	x.set(rewind.In(b).WithKey("k4").Address, "b-k4")
	x.del(rewind.In(b).WithKey("k2").Address)
	x.set(sticky.In(b).WithKey("k9").Address, "b-k9")
	x.commit()

	scan := func(ns string) map[string]string {
		t.Helper()
		out := map[string]string{}
		var keys []string
		p := s.scanValues(storage.ValueQuery{Scope: storage.ConversationScope(b), Namespace: ns, Limit: 100})
		for _, kv := range p.Items {
			keys = append(keys, kv.Key)
			out[kv.Key] = s.decode(kv.Version.Value)
		}
		if p.Next != 0 {
			t.Errorf("ScanValues(%s) Next = %d; want 0 on the last page", ns, p.Next)
		}
		for i := 1; i < len(keys); i++ {
			if keys[i-1] >= keys[i] {
				t.Errorf("ScanValues(%s) keys %q are not strictly ascending", ns, keys)
			}
		}
		return out
	}
	if got, want := scan("test.config"), map[string]string{"k1": "a-k1", "k3": "b-k3", "k4": "b-k4"}; !cmp.Equal(got, want) {
		t.Errorf("rewindable values of the fork = %v; want %v", got, want)
	}
	if got, want := scan("test.ui"), map[string]string{"k9": "b-k9"}; !cmp.Equal(got, want) {
		t.Errorf("sticky values of the fork = %v; want only its own %v", got, want)
	}
}
