package delta_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/core/delta"
)

// textPath is the reference's example preview path (§1.6, "likely pico use").
var textPath = delta.Path{"operation", "message", "content", 0, "text"}

func newPreview(t *testing.T) *delta.Tracker {
	t.Helper()
	return delta.NewTracker(val(t, `{"operation":{"message":{"role":"assistant","content":[{"type":"text","text":""}]},"usage":{"output":0}}}`))
}

func TestFirstFlushIsOneReplace(t *testing.T) {
	tr := newPreview(t)
	if !tr.Dirty() {
		t.Fatal("Dirty() = false before the first flush")
	}
	ops := tr.Flush()
	if len(ops) != 1 || ops[0].Verb != delta.VerbReplace {
		t.Fatalf("first flush = %s; want one r", jsonOf(t, ops))
	}
	if diff := cmp.Diff(tr.State(), ops[0].Value); diff != "" {
		t.Fatalf("r payload (-state +payload):\n%s", diff)
	}
	if tr.Dirty() {
		t.Fatal("Dirty() = true right after a flush")
	}
	if ops := tr.Flush(); ops != nil {
		t.Fatalf("flush with nothing dirty = %s; want no ops", jsonOf(t, ops))
	}
}

func TestOneTokenIsOneAppendAndNothingElse(t *testing.T) {
	tr := newPreview(t)
	replica, _ := delta.Apply(nil, tr.Flush())
	for i, tok := range []string{"Hel", "lo", ",", " wor", "ld 😀", "!"} {
		if err := tr.AppendString(textPath, tok); err != nil {
			t.Fatal(err)
		}
		ops := tr.Flush()
		want := []delta.Op{delta.Append(textPath, tok)}
		if diff := cmp.Diff(want, ops); diff != "" {
			t.Fatalf("token %d: flush = %s; want exactly one a (-want +got):\n%s", i, jsonOf(t, ops), diff)
		}
		var err error
		if replica, err = delta.Apply(replica, ops); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(tr.State(), replica); diff != "" {
		t.Fatalf("replica (-state +replica):\n%s", diff)
	}
}

func TestTokensInOneWindowAreOneAppend(t *testing.T) {
	tr := newPreview(t)
	tr.Flush()
	var all strings.Builder
	for i := range 500 {
		tok := fmt.Sprintf("tok%d ", i)
		all.WriteString(tok)
		if err := tr.AppendString(textPath, tok); err != nil {
			t.Fatal(err)
		}
	}
	ops := tr.Flush()
	want := []delta.Op{delta.Append(textPath, all.String())}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Fatalf("flush after 500 tokens = %d ops; want one a with their text (-want +got):\n%s", len(ops), diff)
	}
}

// TestNoReplaceMidStream streams a whole assistant turn — text, a second
// block, usage, a tool call with growing arguments — and checks that no
// flush after the first is an r, and that each flush replays.
func TestNoReplaceMidStream(t *testing.T) {
	tr := newPreview(t)
	replica, _ := delta.Apply(nil, tr.Flush())
	content := delta.Path{"operation", "message", "content"}
	steps := []func() error{
		func() error { return tr.AppendString(textPath, "Let me look.") },
		func() error {
			return tr.Push(content, map[string]any{"type": "toolCall", "name": "read", "arguments": ""})
		},
		func() error {
			return tr.AppendString(delta.Path{"operation", "message", "content", 1, "arguments"}, `{"path":`)
		},
		func() error {
			return errors.Join(
				tr.AppendString(delta.Path{"operation", "message", "content", 1, "arguments"}, `"a.go"}`),
				tr.Set(delta.Path{"operation", "usage", "output"}, num(12)),
			)
		},
		func() error {
			return errors.Join(
				tr.AppendString(textPath, " More."),
				tr.Set(delta.Path{"operation", "message", "stopReason"}, "toolUse"),
			)
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
		ops := tr.Flush()
		for _, op := range ops {
			if op.Verb == delta.VerbReplace {
				t.Fatalf("step %d: flush = %s has an r mid-stream", i, jsonOf(t, ops))
			}
		}
		var err error
		if replica, err = delta.ApplyImmutable(replica, ops); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if diff := cmp.Diff(tr.State(), replica); diff != "" {
			t.Fatalf("step %d: replica (-state +replica):\n%s", i, diff)
		}
	}
}

// TestSlidingToolTailIsTruncateThenAppend: a tool's output tail is kept to
// a bounded window; each chunk that slides it is one t and one a.
func TestSlidingToolTailIsTruncateThenAppend(t *testing.T) {
	const windowUnits = 40
	tr := delta.NewTracker(val(t, `{"output":""}`))
	replica, _ := delta.Apply(nil, tr.Flush())
	tail := ""
	slid := 0
	for i := range 30 {
		chunk := fmt.Sprintf("line %02d 😀\n", i) // 12 UTF-16 units
		next := tail + chunk
		drop := 0
		if units := utf16.Encode([]rune(next)); len(units) > windowUnits {
			drop = len(units) - windowUnits
			next = string(utf16.Decode(units[drop:]))
		}
		if err := tr.Set(delta.Path{"output"}, next); err != nil {
			t.Fatal(err)
		}
		ops := tr.Flush()
		var want []delta.Op
		if drop > 0 {
			slid++
			want = []delta.Op{delta.Truncate(delta.Path{"output"}, drop), delta.Append(delta.Path{"output"}, chunk)}
		} else {
			want = []delta.Op{delta.Append(delta.Path{"output"}, chunk)}
		}
		if diff := cmp.Diff(want, ops); diff != "" {
			t.Fatalf("chunk %d: flush = %s (-want +got):\n%s", i, jsonOf(t, ops), diff)
		}
		var err error
		if replica, err = delta.Apply(replica, ops); err != nil {
			t.Fatal(err)
		}
		tail = next
	}
	if slid == 0 {
		t.Fatal("the window never slid; the test proves nothing")
	}
	if diff := cmp.Diff(tr.State(), replica); diff != "" {
		t.Fatalf("replica (-state +replica):\n%s", diff)
	}
}

// TestTruncateAndAppendInOneWindowDiffOnce: the string's first write in a
// window anchors it; the flush diffs anchor → final once.
func TestTruncateAndAppendInOneWindowDiffOnce(t *testing.T) {
	tr := delta.NewTracker(val(t, `{"s":"abcdefgh"}`))
	tr.Flush()
	p := delta.Path{"s"}
	err := errors.Join(
		tr.TruncateString(p, 1), tr.AppendString(p, "x"),
		tr.TruncateString(p, 2), tr.AppendString(p, "yz"),
	)
	if err != nil {
		t.Fatal(err)
	}
	checkBatch(t, tr.Flush(), `[["t",["s"],3],["a",["s"],"xyz"]]`)
}

func TestUnrelatedStringIsSet(t *testing.T) {
	tr := delta.NewTracker(val(t, `{"s":"abc"}`))
	tr.Flush()
	if err := tr.Set(delta.Path{"s"}, "xyz"); err != nil {
		t.Fatal(err)
	}
	checkBatch(t, tr.Flush(), `[["s",["s"],"xyz"]]`)
}

func TestReplaceAndRebaseMakeTheNextFlushAReplace(t *testing.T) {
	tr := newPreview(t)
	tr.Flush()
	if err := tr.Replace(val(t, `{"fresh":true}`)); err != nil {
		t.Fatal(err)
	}
	checkBatch(t, tr.Flush(), `[["r",{"fresh":true}]]`)
	if err := tr.Set(delta.Path{"fresh"}, false); err != nil {
		t.Fatal(err)
	}
	tr.Rebase()
	checkBatch(t, tr.Flush(), `[["r",{"fresh":false}]]`)
	if err := tr.Replace(1); err == nil || !errors.Is(err, delta.ErrMalformed) {
		t.Fatalf("Replace(int) err = %v; want ErrMalformed", err)
	}
}

// Published is what the flushes delivered: a mutation, a Replace
// included, is not published until the next flush; a Discard takes the
// value as published, and a Reset publishes its value at once while the
// next flush still carries it to replicas as an r.
func TestPublishedMovesOnlyAtAFlushDiscardOrReset(t *testing.T) {
	tr := delta.NewTracker(val(t, `{"a":"x"}`))
	published := func(want string) {
		t.Helper()
		if got := jsonOf(t, tr.Published()); got != want {
			t.Fatalf("Published() = %s; want %s", got, want)
		}
	}
	published(`{"a":"x"}`)
	if err := tr.AppendString(delta.Path{"a"}, "y"); err != nil {
		t.Fatal(err)
	}
	published(`{"a":"x"}`)
	tr.Flush()
	published(`{"a":"xy"}`)
	if err := tr.Replace(val(t, `{"b":1}`)); err != nil {
		t.Fatal(err)
	}
	published(`{"a":"xy"}`)
	checkBatch(t, tr.Flush(), `[["r",{"b":1}]]`)
	published(`{"b":1}`)
	if err := tr.Replace(val(t, `{"c":2}`)); err != nil {
		t.Fatal(err)
	}
	tr.Discard()
	published(`{"c":2}`)
	if err := tr.Reset(val(t, `{"d":3}`)); err != nil {
		t.Fatal(err)
	}
	published(`{"d":3}`)
	checkBatch(t, tr.Flush(), `[["r",{"d":3}]]`)
	if err := tr.Reset(1); err == nil || !errors.Is(err, delta.ErrMalformed) {
		t.Fatalf("Reset(int) err = %v; want ErrMalformed", err)
	}
	published(`{"d":3}`)
}

func TestDiscardDropsPendingChanges(t *testing.T) {
	tr := delta.NewTracker(val(t, `{"a":"x"}`))
	tr.Flush()
	if err := tr.AppendString(delta.Path{"a"}, "y"); err != nil {
		t.Fatal(err)
	}
	tr.Discard()
	if tr.Dirty() {
		t.Fatal("Dirty() after Discard = true")
	}
	if ops := tr.Flush(); ops != nil {
		t.Fatalf("flush after Discard = %s; want none", jsonOf(t, ops))
	}
	if err := tr.AppendString(delta.Path{"a"}, "z"); err != nil {
		t.Fatal(err)
	}
	checkBatch(t, tr.Flush(), `[["a",["a"],"z"]]`)
}

func TestTrackerRejectsBadMutationsAndKeepsItsState(t *testing.T) {
	tr := delta.NewTracker(val(t, `{"s":"x","xs":[1],"o":{}}`))
	tr.Flush()
	if err := tr.AppendString(delta.Path{"s"}, "y"); err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		name   string
		mutate func() error
		class  error
	}{
		{"append to a number", func() error { return tr.AppendString(delta.Path{"xs", 0}, "y") }, delta.ErrType},
		{"set past the end", func() error { return tr.Set(delta.Path{"xs", 2}, "y") }, delta.ErrRange},
		{"set at the root", func() error { return tr.Set(delta.Path{}, "y") }, delta.ErrMalformed},
		{"reserved path", func() error { return tr.Set(delta.Path{"o", "constructor"}, "y") }, delta.ErrMalformed},
		{"value not JSON", func() error { return tr.Set(delta.Path{"o", "k"}, struct{}{}) }, delta.ErrMalformed},
		{"push onto an object", func() error { return tr.Push(delta.Path{"o"}, "y") }, delta.ErrType},
		{"push onto a missing path", func() error { return tr.Push(delta.Path{"nope"}, "y") }, delta.ErrPath},
		{"truncate too far", func() error { return tr.TruncateString(delta.Path{"s"}, 3) }, delta.ErrRange},
		{"reorder with a short perm", func() error { return tr.Reorder(delta.Path{"xs"}, []int{}) }, delta.ErrRange},
		{"delete through a scalar", func() error { return tr.Delete(delta.Path{"s", "k"}) }, delta.ErrPath},
	}
	for _, r := range rows {
		err := r.mutate()
		var opErr *delta.OpError
		if !errors.As(err, &opErr) || !errors.Is(err, r.class) || opErr.Index != -1 {
			t.Errorf("%s: err = %v; want an *OpError of class %v with index -1", r.name, err, r.class)
		}
	}
	if got := jsonOf(t, tr.State()); got != `{"o":{},"s":"xy","xs":[1]}` {
		t.Fatalf("state = %s after rejected mutations", got)
	}
	checkBatch(t, tr.Flush(), `[["a",["s"],"y"]]`)
}

func TestNewTrackerPanicsOnANonValue(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewTracker(map with an int) did not panic")
		}
	}()
	delta.NewTracker(map[string]any{"n": 1})
}

// TestTrackerNeverWritesWhatItAdopted: the base, the payloads and every
// State snapshot stay as they were while the tracker goes on.
func TestTrackerNeverWritesWhatItAdopted(t *testing.T) {
	base := val(t, `{"list":[{"text":"a"}],"o":{"k":"v"}}`)
	baseCopy := deepCopy(t, base)
	tr := delta.NewTracker(base)
	payload := map[string]any{"text": "p", "inner": []any{"q"}}
	payloadCopy := deepCopy(t, payload)
	if err := errors.Join(
		tr.AppendString(delta.Path{"list", 0, "text"}, "b"),
		tr.Push(delta.Path{"list"}, payload),
	); err != nil {
		t.Fatal(err)
	}
	snap := tr.State()
	snapCopy := deepCopy(t, snap)
	if err := errors.Join(
		tr.AppendString(delta.Path{"list", 1, "text"}, "!"),
		tr.Push(delta.Path{"list", 1, "inner"}, "r"),
		tr.Set(delta.Path{"o", "k"}, "w"),
		tr.Reorder(delta.Path{"list"}, []int{1, 0}),
	); err != nil {
		t.Fatal(err)
	}
	tr.Flush()
	for name, pair := range map[string][2]any{"base": {baseCopy, base}, "payload": {payloadCopy, payload}, "snapshot": {snapCopy, snap}} {
		if diff := cmp.Diff(pair[0], pair[1]); diff != "" {
			t.Errorf("the tracker wrote its %s (-before +after):\n%s", name, diff)
		}
	}
	want := `{"list":[{"inner":["q","r"],"text":"p!"},{"text":"ab"}],"o":{"k":"w"}}`
	if got := jsonOf(t, tr.State()); got != want {
		t.Errorf("state = %s; want %s", got, want)
	}
}

// TestFlushOpsShareNothingWithTheState: Apply adopts the ops it is given, so
// a replica applying them in place must not reach into the tracker.
func TestFlushOpsShareNothingWithTheState(t *testing.T) {
	tr := delta.NewTracker(val(t, `{"xs":[]}`))
	replica, err := delta.Apply(nil, tr.Flush())
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Push(delta.Path{"xs"}, map[string]any{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	ops := tr.Flush()
	if replica, err = delta.Apply(replica, ops); err != nil {
		t.Fatal(err)
	}
	if replica, err = delta.Apply(replica, opsOf(t, `[["s",["xs",0,"k"],"changed"],["s",["extra"],1]]`)); err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(t, tr.State()); got != `{"xs":[{"k":"v"}]}` {
		t.Fatalf("tracker state = %s after a replica wrote its copy", got)
	}
	_ = replica
}

func TestDiffOfLargeArraysAlignsOnUniqueElements(t *testing.T) {
	const n = 1000 // 10^6 cells: past the exact alignment's bound
	var before []any
	for i := range n {
		before = append(before, map[string]any{"i": num(i)})
	}
	// remove element 100, insert one at 500, edit 900 in a copy
	after := append([]any{}, before[:100]...)
	after = append(after, before[101:500]...)
	after = append(after, map[string]any{"new": true})
	after = append(after, before[500:900]...)
	after = append(after, map[string]any{"i": num(-900)})
	after = append(after, before[901:]...)
	// and swap the first and last so the prefix and suffix do not help
	after[0], after[len(after)-1] = after[len(after)-1], after[0]
	ops := delta.Diff(map[string]any{"xs": before}, map[string]any{"xs": after})
	if len(ops) > 10 {
		t.Fatalf("diff = %d ops; want a handful: %s", len(ops), jsonOf(t, ops))
	}
	checkReplays(t, map[string]any{"xs": before}, ops, map[string]any{"xs": after})
}

// TestGrowingAStringNeverChangesOneHandedOut: the tracker grows streamed
// strings in place; every string it handed out — in State, in an op — must
// keep its text, even when an older, shorter one is put back and grown.
func TestGrowingAStringNeverChangesOneHandedOut(t *testing.T) {
	tr := delta.NewTracker(val(t, `{"s":""}`))
	tr.Flush()
	p := delta.Path{"s"}
	text := func() string { return tr.State().(map[string]any)["s"].(string) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tr.AppendString(p, "abc"))
	abc := text()
	must(tr.AppendString(p, "def"))
	ops := tr.Flush()
	abcdef := text()
	must(tr.AppendString(p, "ghi")) // grows in place past "abcdef"
	must(tr.Set(p, abc))            // an older, shorter view of the same bytes
	must(tr.AppendString(p, "XYZ")) // must not write over "def"
	must(tr.AppendString(p, "!"))
	ops2 := tr.Flush()
	for _, c := range []struct{ got, want string }{
		{abc, "abc"}, {abcdef, "abcdef"}, {ops[0].Text, "abcdef"}, {text(), "abcXYZ!"},
	} {
		if c.got != c.want {
			t.Errorf("string = %q; want %q", c.got, c.want)
		}
	}
	checkBatch(t, ops2, `[["s",["s"],"abcXYZ!"]]`) // "abcdef" has no suffix that starts "abcXYZ!"
}
