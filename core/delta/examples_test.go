package delta_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/core/delta"
)

// The tables of shared/reference/delta-and-messages.md §1.6. A mutation is
// written in JavaScript there; each row spells it with Tracker methods.

func TestTrackerExamples(t *testing.T) {
	type row struct {
		name      string
		start     string
		undrained bool // the base batch is not flushed first
		mutate    func(tr *delta.Tracker) error
		want      string
	}
	rows := []row{
		{
			name:  `s+="ab"; s+="cd"`,
			start: `{"s":""}`,
			mutate: func(tr *delta.Tracker) error {
				return errors.Join(tr.AppendString(delta.Path{"s"}, "ab"), tr.AppendString(delta.Path{"s"}, "cd"))
			},
			want: `[["a",["s"],"abcd"]]`,
		},
		{
			name:  `s=s.slice(3)+"xyz"`,
			start: `{"s":"abcdefgh"}`,
			mutate: func(tr *delta.Tracker) error {
				return tr.Set(delta.Path{"s"}, "defgh"+"xyz")
			},
			want: `[["t",["s"],3],["a",["s"],"xyz"]]`,
		},
		{
			name:   `xs.push(3)`,
			start:  `{"xs":[1,2]}`,
			mutate: func(tr *delta.Tracker) error { return tr.Push(delta.Path{"xs"}, num(3)) },
			want:   `[["p",["xs"],2,0,[3]]]`,
		},
		{
			name:   `a=undefined`,
			start:  `{"a":1}`,
			mutate: func(tr *delta.Tracker) error { return tr.Delete(delta.Path{"a"}) },
			want:   `[["d",["a"]]]`,
		},
		{
			name:  `message={content:[{text:"hello world"}],count:1}`,
			start: `{"message":{"content":[{"text":"hello"}],"count":0}}`,
			mutate: func(tr *delta.Tracker) error {
				return tr.Set(delta.Path{"message"}, map[string]any{
					"content": []any{map[string]any{"text": "hello world"}},
					"count":   num(1),
				})
			},
			want: `[["a",["message","content",0,"text"]," world"],["s",["message","count"],1]]`,
		},
		{
			name:   `splice(0,3,9) on a root array`,
			start:  `[1,2,3]`,
			mutate: func(tr *delta.Tracker) error { return tr.Splice(delta.Path{}, 0, 3, num(9)) },
			want:   `[["r",[9]]]`,
		},
		{
			name:   `xs.splice(0,3,9)`,
			start:  `{"xs":[1,2,3]}`,
			mutate: func(tr *delta.Tracker) error { return tr.Splice(delta.Path{"xs"}, 0, 3, num(9)) },
			want:   `[["s",["xs"],[9]]]`,
		},
		{
			name:  `xs[1]={value:2}; xs[1].value=3; xs.length=4`,
			start: `{"xs":[1]}`,
			mutate: func(tr *delta.Tracker) error {
				return errors.Join(
					tr.Set(delta.Path{"xs", 1}, map[string]any{"value": num(2)}),
					tr.Set(delta.Path{"xs", 1, "value"}, num(3)),
					tr.Push(delta.Path{"xs"}, nil, nil), // length 2 → 4 adds nulls
				)
			},
			want: `[["p",["xs"],1,0,[{"value":3},null,null]]]`,
		},
		{
			name:  `push 2, push 3, pop, pop`,
			start: `{"xs":[1]}`,
			mutate: func(tr *delta.Tracker) error {
				return errors.Join(
					tr.Push(delta.Path{"xs"}, num(2)),
					tr.Push(delta.Path{"xs"}, num(3)),
					tr.Splice(delta.Path{"xs"}, 2, 1),
					tr.Splice(delta.Path{"xs"}, 1, 1),
				)
			},
			want: `[]`,
		},
		{
			name:  `a.b=99; a={c:5}`,
			start: `{"a":{"b":1}}`,
			mutate: func(tr *delta.Tracker) error {
				return errors.Join(
					tr.Set(delta.Path{"a", "b"}, num(99)),
					tr.Set(delta.Path{"a"}, map[string]any{"c": num(5)}),
				)
			},
			want: `[["s",["a","c"],5],["d",["a","b"]]]`,
		},
		{
			name:      `x=100, not drained`,
			start:     `{"x":0}`,
			undrained: true,
			mutate:    func(tr *delta.Tracker) error { return tr.Set(delta.Path{"x"}, num(100)) },
			want:      `[["r",{"x":100}]]`,
		},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			tr := delta.NewTracker(val(t, r.start))
			if !r.undrained {
				tr.Flush()
			}
			prev := tr.State()
			if err := r.mutate(tr); err != nil {
				t.Fatalf("mutation: %v", err)
			}
			got := tr.Flush()
			checkBatch(t, got, r.want)
			checkReplays(t, prev, got, tr.State())
		})
	}
}

// TestDiffRevisionsExamples checks the diffRevisions table. The objects a..e
// are distinct; a row's after-array holds the very objects of its before
// value, which is what lets the tracker see that they were kept.
func TestDiffRevisionsExamples(t *testing.T) {
	obj := func(id string) any { return map[string]any{"id": id} }
	a, b, c, d, e := obj("a"), obj("b"), obj("c"), obj("d"), obj("e")
	type row struct {
		name   string
		start  any
		mutate func(tr *delta.Tracker) error
		want   string
	}
	rows := []row{
		{
			name:  "keys changed, added and removed",
			start: val(t, `{"keep":1,"change":1,"remove":true}`),
			mutate: func(tr *delta.Tracker) error {
				return errors.Join(
					tr.Set(delta.Path{"change"}, num(2)),
					tr.Set(delta.Path{"add"}, num(3)),
					tr.Delete(delta.Path{"remove"}),
				)
			},
			want: `[["s",["change"],2],["s",["add"],3],["d",["remove"]]]`,
		},
		{
			name:   `"hello world" → "world"`,
			start:  val(t, `{"text":"hello world"}`),
			mutate: func(tr *delta.Tracker) error { return tr.Set(delta.Path{"text"}, "world") },
			want:   `[["t",["text"],6]]`,
		},
		{
			name:   "[a,b,c] → [b,c,d]",
			start:  map[string]any{"values": []any{a, b, c}},
			mutate: func(tr *delta.Tracker) error { return tr.Set(delta.Path{"values"}, []any{b, c, d}) },
			want:   `[["p",["values"],0,1,[]],["p",["values"],2,0,[{"id":"d"}]]]`,
		},
		{
			name:   "[a,b,c] → [c,a,b]",
			start:  map[string]any{"values": []any{a, b, c}},
			mutate: func(tr *delta.Tracker) error { return tr.Set(delta.Path{"values"}, []any{c, a, b}) },
			want:   `[["m",["values"],[2,0,1]]]`,
		},
		{
			name:   "[a,b,c,d,e] → [a,c,e]",
			start:  map[string]any{"values": []any{a, b, c, d, e}},
			mutate: func(tr *delta.Tracker) error { return tr.Set(delta.Path{"values"}, []any{a, c, e}) },
			want:   `[["p",["values"],1,1,[]],["p",["values"],2,1,[]]]`,
		},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			tr := delta.NewTracker(r.start)
			tr.Flush()
			prev := tr.State()
			if err := r.mutate(tr); err != nil {
				t.Fatalf("mutation: %v", err)
			}
			got := tr.Flush()
			checkBatch(t, got, r.want)
			checkReplays(t, prev, got, tr.State())
		})
	}

	t.Run("20k changed fields", func(t *testing.T) {
		const fields = 20_000
		before := map[string]any{}
		for i := range fields {
			before[fmt.Sprintf("f%05d", i)] = num(0)
		}
		tr := delta.NewTracker(before)
		tr.Flush()
		for i := range fields {
			if err := tr.Set(delta.Path{fmt.Sprintf("f%05d", i)}, num(1)); err != nil {
				t.Fatal(err)
			}
		}
		got := tr.Flush()
		if len(got) != 1 || got[0].Verb != delta.VerbReplace {
			t.Fatalf("flush of %d changed fields = %d ops starting with %q; want one r", fields, len(got), got[0].Verb)
		}
		if diff := cmp.Diff(tr.State(), got[0].Value); diff != "" {
			t.Fatalf("r payload differs from the state (-state +payload):\n%s", diff)
		}
	})
}

// TestDiffMatchesRevisionExamples runs the same revisions through Diff,
// which knows no write order: an object's keys come sorted.
func TestDiffMatchesRevisionExamples(t *testing.T) {
	obj := func(id string) any { return map[string]any{"id": id} }
	a, b, c, d, e := obj("a"), obj("b"), obj("c"), obj("d"), obj("e")
	rows := []struct {
		name          string
		before, after any
		want          string
	}{
		{
			name:   "keys changed, added and removed",
			before: val(t, `{"keep":1,"change":1,"remove":true}`),
			after:  val(t, `{"keep":1,"change":2,"add":3}`),
			want:   `[["s",["add"],3],["s",["change"],2],["d",["remove"]]]`,
		},
		{
			name:   `"hello world" → "world"`,
			before: val(t, `{"text":"hello world"}`),
			after:  val(t, `{"text":"world"}`),
			want:   `[["t",["text"],6]]`,
		},
		{
			name:   "[a,b,c] → [b,c,d]",
			before: map[string]any{"values": []any{a, b, c}},
			after:  map[string]any{"values": []any{b, c, d}},
			want:   `[["p",["values"],0,1,[]],["p",["values"],2,0,[{"id":"d"}]]]`,
		},
		{
			name:   "[a,b,c] → [c,a,b]",
			before: map[string]any{"values": []any{a, b, c}},
			after:  map[string]any{"values": []any{c, a, b}},
			want:   `[["m",["values"],[2,0,1]]]`,
		},
		{
			name:   "[a,b,c,d,e] → [a,c,e]",
			before: map[string]any{"values": []any{a, b, c, d, e}},
			after:  map[string]any{"values": []any{a, c, e}},
			want:   `[["p",["values"],1,1,[]],["p",["values"],2,1,[]]]`,
		},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got := delta.Diff(r.before, r.after)
			checkBatch(t, got, r.want)
			checkReplays(t, r.before, got, r.after)
		})
	}
}

// TestApplierExamples checks the applier cases on xs=[1,2,3].
func TestApplierExamples(t *testing.T) {
	rows := []struct {
		name    string
		batch   string
		want    string // the value after, or "" for an error
		wantErr error
	}{
		{"s at index == length appends", `[["s",["xs",3],9]]`, `{"xs":[1,2,3,9]}`, nil},
		{"s past the end throws", `[["s",["xs",5],9]]`, "", delta.ErrRange},
		{"p with remove 1e9 empties the array", `[["p",["xs"],0,1e9,[]]]`, `{"xs":[]}`, nil},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			for _, apply := range appliers {
				t.Run(apply.name, func(t *testing.T) {
					start := val(t, `{"xs":[1,2,3]}`)
					got, err := apply.fn(start, opsOf(t, r.batch))
					if r.wantErr != nil {
						if !errors.Is(err, r.wantErr) {
							t.Fatalf("err = %v; want %v", err, r.wantErr)
						}
						if diff := cmp.Diff(val(t, `{"xs":[1,2,3]}`), got); diff != "" {
							t.Fatalf("value after a rejected batch changed (-want +got):\n%s", diff)
						}
						return
					}
					if err != nil {
						t.Fatalf("err = %v", err)
					}
					if diff := cmp.Diff(val(t, r.want), got); diff != "" {
						t.Fatalf("value (-want +got):\n%s", diff)
					}
				})
			}
		})
	}
}

// TestWireExamples checks the examples of §1.4.
func TestWireExamples(t *testing.T) {
	t.Run("same path as the previous op is omitted", func(t *testing.T) {
		ops := opsOf(t, `[["t",["output"],200],["a",["output"],"x"]]`)
		checkWire(t, delta.NewEncoder(), delta.NewDecoder(), ops, `[["t",["output"],200],["a","x"]]`)
	})
	t.Run("a path is interned on its second use", func(t *testing.T) {
		enc, dec := delta.NewEncoder(), delta.NewDecoder()
		checkWire(t, enc, dec, opsOf(t, `[["a",["a","deep"],"1"]]`), `[["a",["a","deep"],"1"]]`)
		checkWire(t, enc, dec, opsOf(t, `[["a",["a","deep"],"2"]]`), `[["#",0,["a","deep"]],["a",0,"2"]]`)
		checkWire(t, enc, dec, opsOf(t, `[["a",["a","deep"],"3"]]`), `[["a",0,"3"]]`)
	})
	t.Run("r resets the dictionaries", func(t *testing.T) {
		enc, dec := delta.NewEncoder(), delta.NewDecoder()
		checkWire(t, enc, dec, opsOf(t, `[["a",["x"],"1"]]`), `[["a",["x"],"1"]]`)
		checkWire(t, enc, dec, opsOf(t, `[["a",["x"],"2"]]`), `[["#",0,["x"]],["a",0,"2"]]`)
		checkWire(t, enc, dec, opsOf(t, `[["r",{"x":""}],["a",["x"],"3"]]`), `[["r",{"x":""}],["a",["x"],"3"]]`)
		checkWire(t, enc, dec, opsOf(t, `[["a",["x"],"4"]]`), `[["#",0,["x"]],["a",0,"4"]]`)
		// The base batch is a recovery point: a fresh decoder can start there.
		fresh := delta.NewDecoder()
		checkWire(t, delta.NewEncoder(), fresh, opsOf(t, `[["r",{"x":""}],["a",["x"],"3"]]`), `[["r",{"x":""}],["a",["x"],"3"]]`)
	})
	t.Run("every verb has a short form", func(t *testing.T) {
		// ["xs",0] comes back after ["xs"]: its second explicit use interns it.
		ops := opsOf(t, `[["s",["xs",0],{"k":1}],["s",["xs",0],2],["d",["xs",0]],["p",["xs"],0,0,[1]],["p",["xs"],1,0,["a"]],["m",["xs"],[1,0]],["a",["xs",0],"!"],["t",["xs",0],1]]`)
		checkWire(t, delta.NewEncoder(), delta.NewDecoder(), ops,
			`[["s",["xs",0],{"k":1}],["s",2],["d"],["p",["xs"],0,0,[1]],["p",1,0,["a"]],["m",[1,0]],["#",0,["xs",0]],["a",0,"!"],["t",1]]`)
	})
}

// appliers are the two ways to apply a batch.
var appliers = []struct {
	name string
	fn   func(any, []delta.Op) (any, error)
}{
	{"Apply", delta.Apply},
	{"ApplyImmutable", delta.ApplyImmutable},
}

func num(n int) any { return json.Number(strconv.Itoa(n)) }

// checkBatch compares ops with a batch written as JSON, both as ops and as
// the exact bytes of their JSON form.
func checkBatch(t *testing.T, got []delta.Op, want string) {
	t.Helper()
	wantOps := opsOf(t, want)
	if len(wantOps) == 0 {
		if len(got) != 0 {
			t.Fatalf("ops = %s; want none", jsonOf(t, got))
		}
		return
	}
	if diff := cmp.Diff(wantOps, got); diff != "" {
		t.Fatalf("ops = %s; want %s\n(-want +got):\n%s", jsonOf(t, got), want, diff)
	}
	if g, w := jsonOf(t, got), compact(t, want); g != w {
		t.Fatalf("JSON = %s; want %s", g, w)
	}
}

// checkReplays checks that ops take prev to want under both appliers, and
// that ApplyImmutable leaves prev alone.
func checkReplays(t *testing.T, prev any, ops []delta.Op, want any) {
	t.Helper()
	before := deepCopy(t, prev)
	got, err := delta.ApplyImmutable(prev, ops)
	if err != nil {
		t.Fatalf("ApplyImmutable: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("ApplyImmutable(prev, ops) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, prev); diff != "" {
		t.Fatalf("ApplyImmutable wrote prev (-before +after):\n%s", diff)
	}
	got, err = delta.Apply(deepCopy(t, prev), opsOf(t, jsonOf(t, batchJSON(ops))))
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Apply(copy of prev, ops) (-want +got):\n%s", diff)
	}
}

// batchJSON makes an empty batch marshal as [] rather than null.
func batchJSON(ops []delta.Op) []delta.Op {
	if ops == nil {
		return []delta.Op{}
	}
	return ops
}

// checkWire encodes ops, compares the wire bytes, and decodes them back.
func checkWire(t *testing.T, enc *delta.Encoder, dec *delta.Decoder, ops []delta.Op, want string) {
	t.Helper()
	wire, err := enc.Encode(ops)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if g, w := string(wire), compact(t, want); g != w {
		t.Fatalf("wire = %s; want %s", g, w)
	}
	back, err := dec.Decode(wire)
	if err != nil {
		t.Fatalf("Decode(%s): %v", wire, err)
	}
	if diff := cmp.Diff(ops, back); diff != "" {
		t.Fatalf("Decode(Encode(ops)) (-ops +decoded):\n%s", diff)
	}
}
