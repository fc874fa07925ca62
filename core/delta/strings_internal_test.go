package delta

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestUTF16Len(t *testing.T) {
	for s, want := range map[string]int{"": 0, "abc": 3, "é": 1, "€": 1, "😀": 2, "a😀b😀": 6} {
		if got := utf16Len(s); got != want {
			t.Errorf("utf16Len(%q) = %d; want %d", s, got, want)
		}
	}
}

func TestDropUTF16(t *testing.T) {
	rows := []struct {
		s    string
		n    int
		want string
		err  error
	}{
		{"abc", 0, "abc", nil},
		{"abc", 3, "", nil},
		{"é😀x", 1, "😀x", nil},
		{"é😀x", 3, "x", nil},
		{"é😀x", 2, "", ErrRange}, // inside the surrogate pair
		{"é😀x", 5, "", ErrRange}, // past the end
		{"", 1, "", ErrRange},
	}
	for _, r := range rows {
		got, f := dropUTF16(r.s, r.n)
		var err error
		if f != nil {
			err = f
		}
		if got != r.want || !errors.Is(err, r.err) || (r.err == nil) != (err == nil) {
			t.Errorf("dropUTF16(%q, %d) = %q, %v; want %q, %v", r.s, r.n, got, err, r.want, r.err)
		}
	}
}

func TestOverlap(t *testing.T) {
	var b strings.Builder
	for i := range 8000 {
		fmt.Fprintf(&b, "line %04d\n", i) // 10 bytes a line
	}
	long := b.String() // 80,000 bytes, past the scan bound
	rows := []struct {
		name          string
		before, after string
		want          int
	}{
		{"none", "abc", "xyz", 0},
		{"suffix is prefix", "abcdef", "defxyz", 3},
		{"longest wins", "abab", "ababx", 4},
		{"after inside before", "hello world", "world", 5},
		{"multibyte", "naïve 😀", "😀 ok", 4},
		{"empty after", "abc", "", 0},
		{"sliding window past the scan bound", long, long[40_000:] + "tail", len(long) - 40_000},
		// Every rune equal: both probes hit more candidates than are
		// verified before the real overlap, so the search gives up (a set,
		// larger but never wrong).
		{"repetitive text gives up", strings.Repeat("a", 200) + "b", strings.Repeat("a", 100) + "b" + "c", 0},
	}
	for _, r := range rows {
		if got := overlap(r.before, r.after); got != r.want {
			t.Errorf("%s: overlap = %d; want %d", r.name, got, r.want)
		}
	}
}

func TestValidNumber(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-12", "1.5", "0.25", "1e9", "1E+2", "-3.5e-7"} {
		if !validNumber(s) {
			t.Errorf("validNumber(%q) = false", s)
		}
	}
	for _, s := range []string{"", "-", "01", "+1", "1.", ".5", "1e", "1e+", " 1", "1 ", "NaN", "0x1"} {
		if validNumber(s) {
			t.Errorf("validNumber(%q) = true", s)
		}
	}
}

// TestDiffStopsAtTheDepthBound: a change below PathSegmentsMax is sent as
// a set of the subtree at the bound, so no op carries a longer path.
func TestDiffStopsAtTheDepthBound(t *testing.T) {
	nest := func(leaf any) any {
		v := leaf
		for range PathSegmentsMax + 5 {
			v = map[string]any{"k": v}
		}
		return v
	}
	before, after := nest("x"), nest("xy")
	ops := Diff(before, after)
	if len(ops) != 1 || ops[0].Verb != VerbSet || len(ops[0].Path) != PathSegmentsMax {
		t.Fatalf("Diff = %d ops, first %s at depth %d; want one s at depth %d", len(ops), ops[0].Verb, len(ops[0].Path), PathSegmentsMax)
	}
	got, err := ApplyImmutable(before, ops)
	if err != nil || !equalValue(got, after) {
		t.Fatalf("replay: %v", err)
	}
}
