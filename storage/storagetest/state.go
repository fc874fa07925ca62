package storagetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/storage"
)

// stateTests are values and lists (reference §4.2).
var stateTests = []test{
	{"ARewindableListReadsAsOfAnEntryAcrossAClear", testListAcrossClear},
	{"ARemoveHidesOneElementFromItsPositionOn", testListRemoveByPosition},
	{"DeletingARewindableValueRecordsAbsenceFromItsPositionOn", testRewindableDelete},
	{"StickyListsExposeOnlyCurrentContents", testStickyList},
	{"StickyAndSessionValuesReadTheCurrentValue", testStickyValues},
	{"ReadsReturnCopies", testReadsReturnCopies},
}

// testListAcrossClear is §4.2's example with the sequences it names.
func testListAcrossClear(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	l := storage.ConversationList[string]("game.moves", storage.Rewind).In(c).Address
	x.padTo(40).push(l, "A")
	x.padTo(50).push(l, "B")
	x.padTo(55).entry(c, "user")
	x.commit()
	x = s.tx()
	fork := x.fork(c, 55)
	x.padTo(60).clear(l)
	x.padTo(65).entry(c, "user")
	x.padTo(70).push(l, "C")
	x.padTo(75).entry(c, "user")
	x.commit()

	for _, tc := range []struct {
		conv, at ID
		want     []string
		wantIDs  []ID
	}{
		{c, 55, []string{"A", "B"}, []ID{40, 50}},
		{c, 65, []string{}, []ID{}},
		{c, 75, []string{"C"}, []ID{70}},
		{c, 0, []string{"C"}, []ID{70}},
		// Clear hides; it doesn't erase what an earlier fork needs.
		{fork, 0, []string{"A", "B"}, []ID{40, 50}},
	} {
		a := l
		a.Scope.ID = tc.conv
		if got := s.list(a, tc.at); !cmp.Equal(got, tc.want) {
			t.Errorf("list of %d at %d = %q; want %q", tc.conv, tc.at, got, tc.want)
		}
		if got := s.elementIDs(a, tc.at); !cmp.Equal(got, tc.wantIDs) {
			t.Errorf("element ids of %d at %d = %v; want %v", tc.conv, tc.at, got, tc.wantIDs)
		}
	}
}

func testListRemoveByPosition(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	l := storage.ConversationList[string]("test.list", storage.Rewind).In(c).Address
	x.push(l, "A")
	b := x.push(l, "B")
	x.push(l, "C")
	before := x.entry(c, "user")
	x.commit()
	x = s.tx()
	x.remove(l, b)
	after := x.entry(c, "user")
	x.commit()

	for _, tc := range []struct {
		at   ID
		want []string
	}{
		{before, []string{"A", "B", "C"}},
		{after, []string{"A", "C"}},
		{0, []string{"A", "C"}},
	} {
		if got := s.list(l, tc.at); !cmp.Equal(got, tc.want) {
			t.Errorf("list at %d = %q; want %q", tc.at, got, tc.want)
		}
	}
}

func testRewindableDelete(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	v := storage.ConversationValue[string]("plugin.plan", storage.Rewind).In(c).Address
	set1 := x.set(v, "on")
	e1 := x.entry(c, "user")
	x.commit()
	x = s.tx()
	x.del(v)
	e2 := x.entry(c, "user")
	x.commit()

	if got, ok := s.version(v, e1); !ok || got.Seq != set1 || s.decode(got.Value) != "on" {
		t.Errorf("value at %d = %s at %d (%v); want \"on\" at %d", e1, got.Value, got.Seq, ok, set1)
	}
	for _, at := range []ID{e2, 0} {
		if got := s.str(v, at); got != absent {
			t.Errorf("value at %d after its delete = %q; want absent", at, got)
		}
	}
	x = s.tx()
	x.set(v, "again")
	e3 := x.entry(c, "user")
	x.commit()
	for at, want := range map[ID]string{e1: "on", e2: absent, e3: "again", 0: "again"} {
		if got := s.str(v, at); got != want {
			t.Errorf("value at %d = %q; want %q", at, got, want)
		}
	}
}

func testStickyList(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	x.commit()
	lists := []storage.Address{
		storage.ConversationList[string]("pi.inbox", storage.Sticky).In(c).Address,
		storage.SessionList[string]("pi.usage").Address,
	}
	for _, l := range lists {
		x = s.tx()
		x.push(l, "a")
		b := x.push(l, "b")
		x.push(l, "c")
		x.commit()
		x = s.tx()
		x.remove(l, b)
		x.commit()
		if got, want := s.list(l, 0), []string{"a", "c"}; !cmp.Equal(got, want) {
			t.Errorf("%s after a remove = %q; want %q", l, got, want)
		}
		x = s.tx()
		x.clear(l)
		x.commit()
		if got := s.list(l, 0); len(got) != 0 {
			t.Errorf("%s after a clear = %q; want []", l, got)
		}
		x = s.tx()
		d := x.push(l, "d")
		x.commit()
		if got, want := s.elementIDs(l, 0), []ID{d}; !cmp.Equal(got, want) {
			t.Errorf("%s element ids after an append = %v; want %v", l, got, want)
		}
	}
}

func testStickyValues(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	x.commit()
	for _, v := range []storage.Address{
		storage.ConversationValue[string]("ui.expanded", storage.Sticky).In(c).Address,
		storage.SessionValue[string]("pi.session.name").Address,
	} {
		for _, step := range []struct {
			write func(x *tx)
			want  string
		}{
			{func(x *tx) { x.set(v, "x") }, "x"},
			{func(x *tx) { x.set(v, "y") }, "y"},
			{func(x *tx) { x.del(v) }, absent},
			{func(x *tx) { x.set(v, "z") }, "z"},
		} {
			x = s.tx()
			step.write(x)
			seq := x.next() - 1
			x.commit()
			if got := s.str(v, 0); got != step.want {
				t.Errorf("%s after write %d = %q; want %q", v, seq, got, step.want)
			}
			if got, ok := s.version(v, 0); ok && got.Seq != seq {
				t.Errorf("%s version seq = %d; want %d", v, got.Seq, seq)
			}
		}
	}
}

func testReadsReturnCopies(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	v := storage.ConversationValue[string]("test.value", storage.Rewind).In(c).WithKey("k").Address
	l := storage.ConversationList[string]("test.list", storage.Rewind).In(c).Address
	x.set(v, "original")
	x.push(l, "original")
	x.commit()

	scribble := func(b []byte) {
		for i := range b {
			b[i] = 'X'
		}
	}
	got, _ := s.version(v, 0)
	scribble(got.Value)
	page := s.readList(l, storage.ListQuery{Cursor: all})
	scribble(page.Items[0].Value)
	values := s.scanValues(storage.ValueQuery{Scope: v.Scope, Namespace: v.Namespace, Limit: 10})
	scribble(values.Items[0].Version.Value)

	if got := s.str(v, 0); got != "original" {
		t.Errorf("GetValue after scribbling on earlier reads = %q; want %q", got, "original")
	}
	if got := s.list(l, 0); !cmp.Equal(got, []string{"original"}) {
		t.Errorf("ReadList after scribbling on an earlier read = %q; want [original]", got)
	}
}
