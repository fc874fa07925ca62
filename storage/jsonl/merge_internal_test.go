package jsonl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/storage"
)

// genState draws a task state as the kinds write them: an object with a few
// of a handful of keys, sorted as encoding/json writes a map, or in
// another order, as it writes a struct; its values verbatim JSON.
func genState(t *rapid.T, name string, sorted bool) []byte {
	keys := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "args", "assistant", "call", "output", "result", "z"}), 0, 6, rapid.ID[string]).Draw(t, name+"Keys")
	if sorted {
		slices.Sort(keys)
	}
	out := []byte{'{'}
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		v := rapid.SampledFrom([]string{`null`, `1`, `"a long enough string to be worth a merge"`, `{"v":"a","n":[1,2,3]}`, `[]`, `{}`, `"é"`}).Draw(t, name+"Value")
		out = append(out, `"`+k+`":`+v...)
	}
	return append(out, '}')
}

// mergeMembers reads what stateDiff appended.
func mergeMembers(t *rapid.T, text []byte) (merge json.RawMessage, drop []string) {
	var m struct {
		StateMerge json.RawMessage `json:"stateMerge"`
		StateDrop  []string        `json:"stateDrop"`
	}
	if err := json.Unmarshal(append([]byte{'{'}, append(text[1:], '}')...), &m); err != nil {
		t.Fatalf("stateDiff wrote %s: %v", text, err)
	}
	return m.StateMerge, m.StateDrop
}

// A merge rebuilds the state it was taken from byte for byte, whatever the
// order of the state before; it is taken whenever it is shorter and the new
// state is in its keys' order, and never when it is not in order.
func TestStateDiffRebuildsTheStateItWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		prev := genState(t, "prev", rapid.Bool().Draw(t, "prevSorted"))
		next := genState(t, "next", rapid.IntRange(0, 4).Draw(t, "nextOrder") > 0)
		var scratch [2][]member
		text, ok := stateDiff(nil, prev, next, &scratch)
		nm, _ := objectMembers(next, nil)
		if !sortedUnique(nm) {
			if ok {
				t.Fatalf("a merge to %s, whose keys are out of order", next)
			}
			return
		}
		if !ok {
			// It gave up: only because the merge is no shorter.
			whole := len(`,"state":`) + len(next)
			if text, _ := appendMerge(nil, prev, next, &scratch); len(text) < whole {
				t.Fatalf("no merge from %s to %s, though %s is shorter", prev, next, text)
			}
			return
		}
		merge, drop := mergeMembers(t, text)
		got, err := mergedState(7, prev, merge, drop, &scratch)
		if err != nil {
			t.Fatalf("mergedState(%s, %s, %q): %v", prev, merge, drop, err)
		}
		if !bytes.Equal(got, next) {
			t.Fatalf("the merge %s of %s rebuilds %s; want %s", text, prev, got, next)
		}
	})
}

// mergedState refuses what stateDiff never writes, naming the task.
func TestMergedStateRefusesWhatNoWriterWrites(t *testing.T) {
	prev := []byte(`{"a":1,"b":2}`)
	for name, c := range map[string]struct {
		prev, merge string
		drop        []string
	}{
		"prev not an object":   {prev: `[1]`, merge: `{}`},
		"merge not an object":  {merge: `[1]`},
		"merge null":           {merge: `null`},
		"merge keys unordered": {merge: `{"c":1,"b":1}`},
		"merge key repeated":   {merge: `{"c":1,"c":2}`},
		"merge with space":     {merge: `{"c": 1}`},
		"drop of a missing":    {merge: `{}`, drop: []string{"x"}},
		"drop unordered":       {merge: `{}`, drop: []string{"b", "a"}},
		"drop and set":         {merge: `{"a":3}`, drop: []string{"a"}},
	} {
		p := prev
		if c.prev != "" {
			p = []byte(c.prev)
		}
		_, err := mergedState(7, p, []byte(c.merge), c.drop, new([2][]member))
		var me *MergeError
		if !errors.As(err, &me) || me.Task != 7 || !strings.Contains(err.Error(), "task 7") {
			t.Errorf("%s: mergedState = %v; want a MergeError naming task 7", name, err)
		}
	}
}

// mapStates is a task's states before a line, for encode.
type mapStates map[storage.ID]json.RawMessage

func (m mapStates) TaskState(id storage.ID) (json.RawMessage, bool) {
	s, ok := m[id]
	return s, ok
}

// A line written with merges is what json.Marshal writes of its diskLine,
// reads the same by the fast path and by encoding/json, and rebuilds the
// batch written; full is the length of the line written whole.
func TestALineWithMergesRebuildsItsBatch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		prior := mapStates{}
		var l line
		l.First = 100
		for i, n := 0, rapid.IntRange(1, 5).Draw(t, "writes"); i < n; i++ {
			id := storage.ID(rapid.IntRange(1, 4).Draw(t, "task"))
			if _, ok := prior[id]; !ok && rapid.IntRange(0, 5).Draw(t, "known") > 0 {
				prior[id] = genState(t, "prior", rapid.Bool().Draw(t, "priorSorted"))
			}
			switch rapid.IntRange(0, 4).Draw(t, "kind") {
			case 0:
				l.Writes = append(l.Writes, storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: id, ConversationID: 1, Kind: "tool", Status: "planned", Role: storage.RoleStart, State: genState(t, "state", true)}})
			case 1:
				l.Writes = append(l.Writes, storage.Write{Type: storage.WriteValueSet, Addr: &storage.Address{Scope: storage.SessionScope(), Namespace: "n"}, Value: genState(t, "value", true)})
			default:
				w := storage.Write{Type: storage.WritePatch, ID: id, Status: "running", Role: storage.RoleInflight, State: genState(t, "state", rapid.IntRange(0, 4).Draw(t, "sorted") > 0)}
				if rapid.Bool().Draw(t, "settle") {
					w.Type, w.Status, w.Role = storage.WriteSettle, "done", storage.RoleTerminal
				}
				l.Writes = append(l.Writes, w)
			}
		}
		whole, err := encodeLine(nil, l)
		if err != nil {
			t.Fatal(err)
		}
		var e lineEncoder
		text, full, err := e.encode(nil, l, prior)
		if err != nil {
			t.Fatal(err)
		}
		if full != len(whole) {
			t.Fatalf("full = %d; the line written whole is %d bytes:\n%s\n%s", full, len(whole), whole, text)
		}
		var dl diskLine
		if err := json.Unmarshal(text, &dl); err != nil {
			t.Fatal(err)
		}
		if again, _ := json.Marshal(dl); !bytes.Equal(again, text) {
			t.Fatalf("encode wrote\n%s\njson.Marshal writes its diskLine\n%s", text, again)
		}
		if !sameAsSlow(t, text) {
			t.Fatalf("the fast path gave up on %s", text)
		}
		got, err := parseLine(text, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range got.Merges {
			w := &got.Writes[m.Index]
			if w.State, err = mergedState(w.ID, prior[w.ID], m.Merge, m.Drop, new([2][]member)); err != nil {
				t.Fatal(err)
			}
		}
		got.Merges = nil
		if gotText, _ := encodeLine(nil, got); !bytes.Equal(gotText, whole) {
			t.Fatalf("the line\n%s\nrebuilds\n%s\nwant\n%s", text, gotText, whole)
		}
	})
}

// A merge is taken only over a state the file holds as it is: a state
// before that encoding/json would have escaped is not what replay finds.
func TestNoMergeOverAStateTheFileEscaped(t *testing.T) {
	prev := json.RawMessage(`{"call":"a<b","output":null,"padding":"a long enough string to be worth a merge"}`)
	next := json.RawMessage(`{"call":"a<b","output":1,"padding":"a long enough string to be worth a merge"}`)
	if jsonvalue.Verbatim(prev) {
		t.Fatal("the test's state needs an escape")
	}
	l := line{First: 5, Writes: []storage.Write{{Type: storage.WritePatch, ID: 2, State: next}}}
	var e lineEncoder
	text, _, _ := e.encode(nil, l, mapStates{2: prev})
	if bytes.Contains(text, []byte("stateMerge")) {
		t.Fatalf("a merge over an escaped state: %s", text)
	}
	plain := json.RawMessage(strings.ReplaceAll(string(prev), "<", "-"))
	l.Writes[0].State = json.RawMessage(strings.ReplaceAll(string(next), "<", "-"))
	if text, _, _ = e.encode(nil, l, mapStates{2: plain}); !bytes.Contains(text, []byte(`"stateMerge":{"output":1}`)) {
		t.Fatalf("no merge over the same state without the escape: %s", text)
	}
}

// The batch limit holds the batch written whole, as on every backend: a
// batch over it is refused though its merges would have fit.
func TestTheBatchLimitHoldsTheBatchNotItsMerges(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := scratchSession(t, path)
	defer s.Close(ctx)
	state := json.RawMessage(`{"call":"` + strings.Repeat("x", 200) + `","n":1}`)
	if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WritePatch, ID: 2, State: state}}}); err != nil {
		t.Fatal(err)
	}
	patch := storage.Write{Type: storage.WritePatch, ID: 2, State: json.RawMessage(`{"call":"` + strings.Repeat("x", 200) + `","n":2}`)}
	whole, _ := encodeLine(nil, line{First: s.LastSeq() + 1, Writes: []storage.Write{patch}})
	defer func(max int) { batchBytesMax = max }(batchBytesMax)
	batchBytesMax = len(whole) - 1
	before, _ := os.ReadFile(path)
	_, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{patch}})
	var tooLarge *storage.BatchTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Bytes != len(whole) || tooLarge.Max != len(whole)-1 {
		t.Fatalf("commit = %v; want the batch of %d bytes refused", err, len(whole))
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("the refused batch was written")
	}
	batchBytesMax = len(whole)
	if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{patch}}); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Contains(after, []byte(`"stateMerge":{"n":2}`)) {
		t.Fatalf("the batch at the limit was not written as a merge:\n%s", after)
	}
}
