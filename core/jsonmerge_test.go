package core

import (
	"encoding/json"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// jsonValue draws a JSON value as Go data, with keys and strings that
// sometimes need escaping, so both the splice and its fallback are taken.
func jsonValue(t *rapid.T, depth int) any {
	text := rapid.SampledFrom([]string{"a", "b", "zz", "", "x<y", "a&b", "\u2028", "q\"uote", "back\\slash", "ünï", "tab\t", "KEY"})
	choice := rapid.IntRange(0, 6).Draw(t, "choice")
	if depth > 2 {
		choice %= 4
	}
	switch choice {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, "bool")
	case 2:
		return rapid.Float64Range(-1e6, 1e6).Draw(t, "num")
	case 3:
		return text.Draw(t, "str")
	case 4:
		n := rapid.IntRange(0, 3).Draw(t, "len")
		arr := make([]any, n)
		for i := range arr {
			arr[i] = jsonValue(t, depth+1)
		}
		return arr
	default:
		return jsonObject(t, depth+1)
	}
}

func jsonObject(t *rapid.T, depth int) map[string]any {
	key := rapid.SampledFrom([]string{"a", "b", "attempt", "status", "z", "", "k<", "ü", "A", "aa"})
	n := rapid.IntRange(0, 5).Draw(t, "members")
	m := map[string]any{}
	for range n {
		m[key.Draw(t, "key")] = jsonValue(t, depth)
	}
	return m
}

// The splice gives exactly the maps' bytes whenever it applies, and
// mergeState equals mergeMaps always.
func TestMergeStateSpliceEqualsTheMaps(t *testing.T) {
	spliced := 0
	rapid.Check(t, func(t *rapid.T) {
		base := must(json.Marshal(jsonObject(t, 0)))
		patch := jsonObject(t, 0)
		raw := must(Marshal(patch))
		want := mergeMaps(base, raw)
		if got, ok := mergeObjects(base, raw); ok {
			spliced++
			if string(got) != string(want) {
				t.Fatalf("splice of %s and %s = %s; the maps give %s", base, raw, got, want)
			}
		}
		got, err := mergeState(base, patch)
		if err != nil || string(got) != string(want) {
			t.Fatalf("mergeState(%s, %s) = %s, %v; want %s", base, raw, got, err, want)
		}
	})
	if spliced == 0 {
		t.Fatal("no draw took the splice")
	}
}

// States wider than the member lists mergeObjects keeps on its stack
// (stateMembersMax) splice the same.
func TestMergeObjectsOfWideStatesEqualsTheMaps(t *testing.T) {
	wide := 0
	rapid.Check(t, func(t *rapid.T) {
		object := func(label string) map[string]any {
			m := map[string]any{}
			for range rapid.IntRange(0, 3*stateMembersMax).Draw(t, label) {
				m[fmt.Sprintf("k%d", rapid.IntRange(0, 3*stateMembersMax).Draw(t, "key"))] = jsonValue(t, 1)
			}
			return m
		}
		base, patch := must(json.Marshal(object("base"))), must(json.Marshal(object("patch")))
		want := mergeMaps(base, patch)
		got, ok := mergeObjects(base, patch)
		if !ok || string(got) != string(want) {
			t.Fatalf("splice of %s and %s = %s, %v; the maps give %s", base, patch, got, ok, want)
		}
		var n map[string]any
		if json.Unmarshal(base, &n) == nil && len(n) > stateMembersMax {
			wide++
		}
	})
	if wide == 0 {
		t.Fatal("no draw had a state wider than stateMembersMax")
	}
}

// What the splice refuses, the maps take.
func TestMergeObjectsRefusesWhatItCannotVouchFor(t *testing.T) {
	for _, tc := range []struct{ base, patch string }{
		{`{"a": 1}`, `{"b":2}`},           // not compact
		{`{"a":1,"a":2}`, `{"b":2}`},      // a key twice
		{`{"a\u0041":1}`, `{"b":2}`},      // an escaped key
		{`{"a":"<"}`, `{"b":2}`},          // a byte Marshal escapes
		{"{\"a\":\"\u2028\"}", `{"b":2}`}, // a line separator written raw
		{`[1]`, `{"b":2}`},                // not an object
		{`{"a":1}`, `3`},                  // a patch that replaces
		{`null`, `{"b":2}`},
	} {
		if out, ok := mergeObjects([]byte(tc.base), []byte(tc.patch)); ok {
			t.Errorf("mergeObjects(%s, %s) spliced to %s; want a refusal", tc.base, tc.patch, out)
		}
	}
	for _, tc := range []struct{ base, patch, want string }{
		{`{"b":{"x":[1,{"y":"}"}]},"d":"a,b"}`, `{"a":true,"d":null}`, `{"a":true,"b":{"x":[1,{"y":"}"}]},"d":null}`},
		{`{"a":null}`, `{"a":false}`, `{"a":false}`},                                // the patch's value wins
		{`{"z":1,"b":2,"m":3}`, `{"c":4,"a":5}`, `{"a":5,"b":2,"c":4,"m":3,"z":1}`}, // stored out of order: sorted
		{`{"":1,"a":"\u003c"}`, `{"b":"q\"}"}`, `{"":1,"a":"\u003c","b":"q\"}"}`},   // the empty key; escapes inside values
	} {
		out, ok := mergeObjects([]byte(tc.base), []byte(tc.patch))
		if !ok || string(out) != tc.want || string(out) != string(mergeMaps([]byte(tc.base), []byte(tc.patch))) {
			t.Errorf("mergeObjects(%s, %s) = %s, %v; want %s, as the maps give", tc.base, tc.patch, out, ok, tc.want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
