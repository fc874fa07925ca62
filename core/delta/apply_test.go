package delta_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/core/delta"
)

// applyStart is the value the apply tables start from. "s" holds a rune
// outside the BMP, which is two UTF-16 code units: its length is 7.
const applyStart = `{"s":"héllo😀","n":1,"xs":[1,2,3],"o":{"k":"v","deep":{"x":[true]}},"nil":null}`

func TestApplySemantics(t *testing.T) {
	rows := []struct {
		name  string
		batch string
		want  string
	}{
		{"r replaces the root", `[["r",[1]]]`, `[1]`},
		{"r then ops on its payload", `[["r",{"a":[]}],["p",["a"],0,0,["x"]],["a",["a",0],"y"]]`, `{"a":["xy"]}`},
		{"s adds a key", `[["s",["o","new"],{"z":1}]]`, `{"s":"héllo😀","n":1,"xs":[1,2,3],"o":{"k":"v","deep":{"x":[true]},"new":{"z":1}},"nil":null}`},
		{"s replaces an element", `[["s",["xs",1],"two"]]`, `{"s":"héllo😀","n":1,"xs":[1,"two",3],"o":{"k":"v","deep":{"x":[true]}},"nil":null}`},
		{"s may use a reserved key inside its payload", `[["s",["o"],{"__proto__":1,"constructor":{"prototype":2}}]]`, `{"s":"héllo😀","n":1,"xs":[1,2,3],"o":{"__proto__":1,"constructor":{"prototype":2}},"nil":null}`},
		{"d removes a key", `[["d",["o","k"]]]`, `{"s":"héllo😀","n":1,"xs":[1,2,3],"o":{"deep":{"x":[true]}},"nil":null}`},
		{"d of a missing key is a no-op", `[["d",["o","missing"]]]`, applyStart},
		{"d of an array index splices it out", `[["d",["xs",0]]]`, `{"s":"héllo😀","n":1,"xs":[2,3],"o":{"k":"v","deep":{"x":[true]}},"nil":null}`},
		{"a appends", `[["a",["s"],"!"],["a",["s"],"?"]]`, `{"s":"héllo😀!?","n":1,"xs":[1,2,3],"o":{"k":"v","deep":{"x":[true]}},"nil":null}`},
		{"a appends to a string in an array", `[["s",["xs",0],"x"],["a",["xs",0],"y"]]`, `{"s":"héllo😀","n":1,"xs":["xy",2,3],"o":{"k":"v","deep":{"x":[true]}},"nil":null}`},
		{"t counts UTF-16 code units", `[["t",["s"],5]]`, `{"s":"😀","n":1,"xs":[1,2,3],"o":{"k":"v","deep":{"x":[true]}},"nil":null}`},
		{"t of the whole length empties", `[["t",["s"],7]]`, `{"s":"","n":1,"xs":[1,2,3],"o":{"k":"v","deep":{"x":[true]}},"nil":null}`},
		{"t of 0 is a no-op", `[["t",["s"],0]]`, applyStart},
		{"p inserts", `[["p",["xs"],1,0,["a","b"]]]`, `{"s":"héllo😀","n":1,"xs":[1,"a","b",2,3],"o":{"k":"v","deep":{"x":[true]}},"nil":null}`},
		{"p removes and inserts", `[["p",["xs"],0,2,[9]]]`, `{"s":"héllo😀","n":1,"xs":[9,3],"o":{"k":"v","deep":{"x":[true]}},"nil":null}`},
		{"p at the end appends", `[["p",["xs"],3,5,[4]]]`, `{"s":"héllo😀","n":1,"xs":[1,2,3,4],"o":{"k":"v","deep":{"x":[true]}},"nil":null}`},
		{"p on a root array", `[["r",[1,2]],["p",[],0,1,[]]]`, `[2]`},
		{"m reorders", `[["m",["xs"],[2,0,1]]]`, `{"s":"héllo😀","n":1,"xs":[3,1,2],"o":{"k":"v","deep":{"x":[true]}},"nil":null}`},
		{"m on a root array", `[["r",["a","b"]],["m",[],[1,0]]]`, `["b","a"]`},
		{"deep paths", `[["p",["o","deep","x"],1,0,[false]],["s",["o","deep","x",0],null]]`, `{"s":"héllo😀","n":1,"xs":[1,2,3],"o":{"k":"v","deep":{"x":[null,false]}},"nil":null}`},
		{"an empty batch changes nothing", `[]`, applyStart},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			for _, apply := range appliers {
				t.Run(apply.name, func(t *testing.T) {
					start := val(t, applyStart)
					got, err := apply.fn(start, opsOf(t, r.batch))
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

// TestApplyRejectsBadBatchWhole: every row is a batch whose earlier ops are
// fine (and write) and whose op wantIndex is bad. Both appliers must name
// that index and class and leave the value exactly as it was.
func TestApplyRejectsBadBatchWhole(t *testing.T) {
	// good ops that write everywhere the bad ones might look
	good := []delta.Op{
		delta.Append(delta.Path{"s"}, "!"),
		delta.Set(delta.Path{"o", "k2"}, "v2"),
		delta.Delete(delta.Path{"o", "k"}),
		delta.Splice(delta.Path{"xs"}, 3, 0, []any{json.Number("4")}),
		delta.Set(delta.Path{"xs", 0}, "zero"),
		delta.Reorder(delta.Path{"xs"}, []int{3, 2, 1, 0}),
		delta.Set(delta.Path{"o", "deep", "x", 1}, json.Number("7")),
		delta.Delete(delta.Path{"xs", 1}),
	}
	deep := make(delta.Path, delta.PathSegmentsMax+1)
	for i := range deep {
		deep[i] = "k"
	}
	rows := []struct {
		name  string
		bad   delta.Op
		class error
	}{
		{"unknown verb", delta.Op{Verb: "x", Path: delta.Path{"n"}}, delta.ErrMalformed},
		{"empty verb", delta.Op{Path: delta.Path{"n"}}, delta.ErrMalformed},
		{"field of another verb (arity)", delta.Op{Verb: delta.VerbDelete, Path: delta.Path{"n"}, Value: "x"}, delta.ErrMalformed},
		{"text on a set (arity)", delta.Op{Verb: delta.VerbSet, Path: delta.Path{"n"}, Text: "x"}, delta.ErrMalformed},
		{"r with a path", delta.Op{Verb: delta.VerbReplace, Path: delta.Path{"n"}}, delta.ErrMalformed},
		{"s at the root", delta.Set(delta.Path{}, "x"), delta.ErrMalformed},
		{"a at the root", delta.Append(nil, "x"), delta.ErrMalformed},
		{"path element float64", delta.Set(delta.Path{"xs", 1.0}, "x"), delta.ErrMalformed},
		{"path element negative", delta.Set(delta.Path{"xs", -1}, "x"), delta.ErrMalformed},
		{"path element reserved", delta.Set(delta.Path{"o", "__proto__", "x"}, "x"), delta.ErrMalformed},
		{"path element constructor", delta.Delete(delta.Path{"constructor"}), delta.ErrMalformed},
		{"path too deep", delta.Set(deep, "x"), delta.ErrMalformed},
		{"payload int", delta.Set(delta.Path{"n"}, 2), delta.ErrMalformed},
		{"payload nil slice", delta.Set(delta.Path{"n"}, []any(nil)), delta.ErrMalformed},
		{"payload bad number", delta.Set(delta.Path{"n"}, json.Number("01")), delta.ErrMalformed},
		{"payload bad UTF-8", delta.Set(delta.Path{"n"}, "\xff"), delta.ErrMalformed},
		{"splice item float64", delta.Splice(delta.Path{"xs"}, 0, 0, []any{1.5}), delta.ErrMalformed},
		{"negative count", delta.Truncate(delta.Path{"s"}, -1), delta.ErrMalformed},
		{"negative splice index", delta.Splice(delta.Path{"xs"}, -1, 0, nil), delta.ErrMalformed},
		{"perm not a bijection", delta.Reorder(delta.Path{"xs"}, []int{0, 0, 1, 2}), delta.ErrMalformed},
		{"missing key on the way", delta.Set(delta.Path{"nope", "x"}, "x"), delta.ErrPath},
		{"key on an array", delta.Set(delta.Path{"xs", "0"}, "x"), delta.ErrPath},
		{"index on an object", delta.Set(delta.Path{"o", 0}, "x"), delta.ErrPath},
		{"step into a scalar", delta.Set(delta.Path{"n", "x"}, "x"), delta.ErrPath},
		{"step into null", delta.Set(delta.Path{"nil", 0}, "x"), delta.ErrPath},
		{"append to a missing key", delta.Append(delta.Path{"missing"}, "x"), delta.ErrPath},
		{"s index past length", delta.Set(delta.Path{"xs", 9}, "x"), delta.ErrRange},
		{"d index at length", delta.Delete(delta.Path{"xs", 3}), delta.ErrRange},
		{"index past the end on the way", delta.Set(delta.Path{"xs", 7, "k"}, "x"), delta.ErrRange},
		{"p index past length", delta.Splice(delta.Path{"xs"}, 5, 0, nil), delta.ErrRange},
		{"m perm too short", delta.Reorder(delta.Path{"xs"}, []int{1, 0}), delta.ErrRange},
		{"t past the end", delta.Truncate(delta.Path{"s"}, 100), delta.ErrRange},
		{"t splits a surrogate pair", delta.Truncate(delta.Path{"s"}, 6), delta.ErrRange}, // "héllo" is 5 units, "😀" 2
		{"a on a number", delta.Append(delta.Path{"n"}, "x"), delta.ErrType},
		{"a on null", delta.Append(delta.Path{"nil"}, "x"), delta.ErrType},
		{"t on an array", delta.Truncate(delta.Path{"xs"}, 1), delta.ErrType},
		{"p on an object", delta.Splice(delta.Path{"o"}, 0, 0, nil), delta.ErrType},
		{"m on a string", delta.Reorder(delta.Path{"s"}, nil), delta.ErrType},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			batch := append(append([]delta.Op{}, good...), r.bad)
			for _, apply := range appliers {
				t.Run(apply.name, func(t *testing.T) {
					start := val(t, applyStart)
					got, err := apply.fn(start, batch)
					var opErr *delta.OpError
					if !errors.As(err, &opErr) {
						t.Fatalf("err = %v; want an *OpError", err)
					}
					if opErr.Index != len(good) || !errors.Is(err, r.class) {
						t.Fatalf("err = %v (index %d); want index %d, class %v", err, opErr.Index, len(good), r.class)
					}
					if opErr.Op != string(r.bad.Verb) || !strings.Contains(err.Error(), "op 8") {
						t.Fatalf("err = %q names op %q; want op 8 (%s)", err, opErr.Op, r.bad.Verb)
					}
					if diff := cmp.Diff(val(t, applyStart), start); diff != "" {
						t.Fatalf("the rejected batch changed the value (-want +got):\n%s", diff)
					}
					if diff := cmp.Diff(val(t, applyStart), got); diff != "" {
						t.Fatalf("returned value (-want +got):\n%s", diff)
					}
				})
			}
		})
	}
	t.Run("the good ops alone apply", func(t *testing.T) {
		for _, apply := range appliers {
			got, err := apply.fn(val(t, applyStart), good)
			if err != nil {
				t.Fatalf("%s: %v", apply.name, err)
			}
			want := `{"s":"héllo😀!","n":1,"xs":[4,2,"zero"],"o":{"k2":"v2","deep":{"x":[true,7]}},"nil":null}`
			if diff := cmp.Diff(val(t, want), got); diff != "" {
				t.Fatalf("%s (-want +got):\n%s", apply.name, diff)
			}
		}
	})
}

// TestApplyImmutableSharesWhatItDoesNotChange: §1.3 — containers off the
// written paths stay shared, and a batch can be fanned out.
func TestApplyImmutableSharesWhatItDoesNotChange(t *testing.T) {
	prev := val(t, `{"a":{"big":[1,2,3]},"b":{"text":"x"}}`)
	ops := opsOf(t, `[["a",["b","text"],"y"],["s",["c"],{"n":[1]}]]`)
	one, err := delta.ApplyImmutable(prev, ops)
	if err != nil {
		t.Fatal(err)
	}
	two, err := delta.ApplyImmutable(prev, ops)
	if err != nil {
		t.Fatal(err)
	}
	pm, om := prev.(map[string]any), one.(map[string]any)
	if !sameMap(pm["a"], om["a"]) {
		t.Errorf("the untouched subtree a was copied; want it shared")
	}
	if sameMap(pm["b"], om["b"]) || sameMap(pm, om) {
		t.Errorf("the written path was not copied")
	}
	if !sameMap(om["c"], ops[1].Value) {
		t.Errorf("the s payload was copied; want it taken up by reference")
	}
	if diff := cmp.Diff(one, two); diff != "" {
		t.Errorf("fan-out results differ:\n%s", diff)
	}
	if got := jsonOf(t, prev); got != `{"a":{"big":[1,2,3]},"b":{"text":"x"}}` {
		t.Errorf("prev = %s; it was written", got)
	}
	// A later op inside a taken-up payload copies it rather than write it.
	three, err := delta.ApplyImmutable(one, opsOf(t, `[["p",["c","n"],1,0,[2]]]`))
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(t, ops[1].Value); got != `{"n":[1]}` {
		t.Errorf("payload = %s after a later op wrote into its place; want it untouched", got)
	}
	if got := jsonOf(t, three.(map[string]any)["c"]); got != `{"n":[1,2]}` {
		t.Errorf("c = %s; want {\"n\":[1,2]}", got)
	}
}

// TestApplyAdoptsInPlace: §1.3 — apply writes the value and takes up r
// payloads by reference.
func TestApplyAdoptsInPlace(t *testing.T) {
	value := val(t, `{"a":{"k":1}}`)
	inner := value.(map[string]any)["a"]
	if _, err := delta.Apply(value, opsOf(t, `[["s",["a","k"],2]]`)); err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(t, inner); got != `{"k":2}` {
		t.Errorf("inner map = %s; Apply should have written it in place", got)
	}
	payload := map[string]any{"x": "1"}
	got, err := delta.Apply(nil, []delta.Op{delta.Replace(payload), delta.Append(delta.Path{"x"}, "2")})
	if err != nil {
		t.Fatal(err)
	}
	if !sameMap(got, payload) || payload["x"] != "12" {
		t.Errorf("r payload = %v, result %v; want the payload adopted and written", payload, got)
	}
}

func sameMap(a, b any) bool {
	x, ok1 := a.(map[string]any)
	y, ok2 := b.(map[string]any)
	if !ok1 || !ok2 {
		return false
	}
	x["\x00probe"] = true
	_, same := y["\x00probe"]
	delete(x, "\x00probe")
	return same
}

func TestParseOpsIsStrict(t *testing.T) {
	rows := []struct {
		name  string
		batch string
		index int
		op    string
	}{
		{"not JSON", `[`, -1, ""},
		{"not an array", `{"r":1}`, -1, ""},
		{"trailing data", `[] []`, -1, ""},
		{"op not an array", `[1]`, 0, ""},
		{"empty op", `[[]]`, 0, ""},
		{"verb not a string", `[[1,2]]`, 0, ""},
		{"unknown verb", `[["r",1],["x",["a"]]]`, 1, "x"},
		{"m-like unknown verb", `[["M",["a"],[]]]`, 0, "M"},
		{"r arity", `[["r"]]`, 0, "r"},
		{"r arity long", `[["r",1,2]]`, 0, "r"},
		{"s arity", `[["s",["a"]]]`, 0, "s"},
		{"d arity", `[["d",["a"],1]]`, 0, "d"},
		{"p arity", `[["p",["xs"],0,0]]`, 0, "p"},
		{"string path", `[["s","a",1]]`, 0, "s"},
		{"empty path for s", `[["s",[],1]]`, 0, "s"},
		{"empty path for d", `[["d",[]]]`, 0, "d"},
		{"reserved segment", `[["d",["__proto__"]]]`, 0, "d"},
		{"fractional index", `[["s",["xs",1.5],1]]`, 0, "s"},
		{"negative index", `[["s",["xs",-1],1]]`, 0, "s"},
		{"boolean segment", `[["s",[true],1]]`, 0, "s"},
		{"a text not a string", `[["a",["s"],1]]`, 0, "a"},
		{"t count negative", `[["t",["s"],-1]]`, 0, "t"},
		{"t count fractional", `[["t",["s"],1.5]]`, 0, "t"},
		{"t count a string", `[["t",["s"],"1"]]`, 0, "t"},
		{"p items not an array", `[["p",["xs"],0,0,{}]]`, 0, "p"},
		{"p remove negative", `[["p",["xs"],0,-1,[]]]`, 0, "p"},
		{"m perm not a bijection", `[["m",["xs"],[0,0]]]`, 0, "m"},
		{"m perm out of range", `[["m",["xs"],[1,2]]]`, 0, "m"},
		{"path too deep", `[["d",[` + strings.Repeat(`"k",`, delta.PathSegmentsMax) + `"k"]]]`, 0, "d"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			ops, err := delta.ParseOps([]byte(r.batch))
			var opErr *delta.OpError
			if !errors.As(err, &opErr) || !errors.Is(err, delta.ErrMalformed) {
				t.Fatalf("ParseOps(%s) = %v, %v; want an *OpError of class ErrMalformed", r.batch, ops, err)
			}
			if opErr.Index != r.index || opErr.Op != r.op {
				t.Fatalf("err = %v: index %d, op %q; want index %d, op %q", err, opErr.Index, opErr.Op, r.index, r.op)
			}
		})
	}
}

func TestParseOpsAcceptsIntegersInAnySpelling(t *testing.T) {
	ops := opsOf(t, `[["p",["xs",0.0],1e0,1E+1,[]],["t",["s"],2.0]]`)
	want := []delta.Op{
		delta.Splice(delta.Path{"xs", 0}, 1, 10, nil),
		delta.Truncate(delta.Path{"s"}, 2),
	}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Fatalf("ops (-want +got):\n%s", diff)
	}
}

func TestOpJSONIsTheReferenceTuple(t *testing.T) {
	rows := []struct {
		op   delta.Op
		want string
	}{
		{delta.Replace(map[string]any{"b": json.Number("1"), "a": nil}), `["r",{"a":null,"b":1}]`},
		{delta.Replace(nil), `["r",null]`},
		{delta.Set(delta.Path{"a", 0}, "x"), `["s",["a",0],"x"]`},
		{delta.Set(delta.Path{"a"}, nil), `["s",["a"],null]`},
		{delta.Delete(delta.Path{"a"}), `["d",["a"]]`},
		{delta.Append(delta.Path{"a"}, "😀"), `["a",["a"],"😀"]`},
		{delta.Truncate(delta.Path{"a"}, 3), `["t",["a"],3]`},
		{delta.Splice(delta.Path{"xs"}, 1, 2, []any{"x"}), `["p",["xs"],1,2,["x"]]`},
		{delta.Splice(nil, 0, 0, nil), `["p",[],0,0,[]]`},
		{delta.Reorder(delta.Path{"xs"}, []int{1, 0}), `["m",["xs"],[1,0]]`},
		{delta.Reorder(nil, nil), `["m",[],[]]`},
	}
	for _, r := range rows {
		got, err := json.Marshal(r.op)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", r.op, err)
		}
		if string(got) != r.want {
			t.Errorf("Marshal(%+v) = %s; want %s", r.op, got, r.want)
		}
		var back delta.Op
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("Unmarshal(%s): %v", got, err)
		}
		if diff := cmp.Diff(r.op, back); diff != "" {
			t.Errorf("Unmarshal(Marshal(op)) (-op +back):\n%s", diff)
		}
	}
	if _, err := json.Marshal(delta.Op{Verb: "x"}); !errors.Is(err, delta.ErrMalformed) {
		t.Errorf("Marshal of an unknown verb: err = %v; want ErrMalformed", err)
	}
}

func TestIsBase(t *testing.T) {
	if !delta.IsBase(opsOf(t, `[["r",1],["s",["a"],1]]`)) {
		t.Error("IsBase of a batch starting with r = false")
	}
	if delta.IsBase(opsOf(t, `[["s",["a"],1],["r",1]]`)) || delta.IsBase(nil) {
		t.Error("IsBase of a batch not starting with r = true")
	}
}
