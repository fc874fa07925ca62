package jsonvalue

import (
	"testing"

	"pgregory.net/rapid"
)

// plainRun never passes a byte that is not plain, and stops short of the
// first such byte by less than a word: drawn texts with a quote, a
// backslash, a control character or a byte outside ASCII at any position.
func TestPlainRunStopsWithinAWordOfTheFirstSpecialByte(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.ByteRange(0x20, 0x7e), 0, 40).Draw(t, "plain")
		for k, n := 0, rapid.IntRange(0, 3).Draw(t, "specials"); k < n && len(b) > 0; k++ {
			b[rapid.IntRange(0, len(b)-1).Draw(t, "at")] = rapid.SampledFrom([]byte{'"', '\\', 0x00, 0x1f, 0x80, 0xff, 0xc3}).Draw(t, "byte")
		}
		from := rapid.IntRange(0, len(b)).Draw(t, "from")
		ascii := rapid.Bool().Draw(t, "ascii")
		table := &plainBytes[1]
		if ascii {
			table = &plainBytes[0]
		}
		first := from
		for first < len(b) && table[b[first]] {
			first++
		}
		got := plainRun(b, from, ascii)
		if got > first || first-got >= 8 && got+8 <= len(b) {
			t.Fatalf("plainRun(%q, %d, %v) = %d; the first byte that is not plain is at %d", b, from, ascii, got, first)
		}
	})
}
