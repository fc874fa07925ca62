package localenv

import "testing"

func TestCompleteUTF8HoldsBackOnlyACutSequence(t *testing.T) {
	euro := "\xe2\x82\xac" // €, three bytes
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"a" + euro, 4},
		{"a" + euro[:1], 1},
		{"a" + euro[:2], 1},
		{"\xf0\x9f\x98", 0},     // 😀 without its last byte
		{"\xf0\x9f\x98\x80", 4}, // 😀 whole
		{"a\x80\x80\x80", 4},    // stray continuation bytes: invalid, sent as they are
		{"a\xff", 2},            // never valid
	} {
		if got := completeUTF8([]byte(tc.in)); got != tc.want {
			t.Errorf("completeUTF8(%q) = %d; want %d", tc.in, got, tc.want)
		}
	}
}
