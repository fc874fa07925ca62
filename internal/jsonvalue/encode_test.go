package jsonvalue_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/pico-go/pico/internal/jsonvalue"
)

// sameStringAsMarshal fails t unless AppendString writes s after a prefix
// as json.Marshal writes it.
func sameStringAsMarshal(t interface {
	Helper()
	Fatalf(string, ...any)
}, s string) {
	t.Helper()
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("json.Marshal(%q): %v", s, err)
	}
	got := jsonvalue.AppendString([]byte("prefix"), s)
	if string(got) != "prefix"+string(want) {
		t.Fatalf("AppendString(%q) = %s, json.Marshal writes %s", s, got[len("prefix"):], want)
	}
}

// Every byte alone and between others, every rune at the edges of the
// UTF-8 lengths, the two JavaScript line separators, and invalid UTF-8 of
// every kind (a lone continuation byte, a cut sequence, an overlong form,
// a surrogate, past U+10FFFF).
func TestAppendStringWritesWhatMarshalWrites(t *testing.T) {
	for c := range 256 {
		for _, form := range []string{"%", "a%b", "%%", "é%", "%é"} {
			sameStringAsMarshal(t, strings.ReplaceAll(form, "%", string([]byte{byte(c)})))
		}
	}
	for _, r := range []rune{0x7f, 0x80, 0x7ff, 0x800, 0x2027, 0x2028, 0x2029, 0x202a, 0xd7ff, 0xe000, 0xfffd, 0xffff, 0x10000, 0x10ffff} {
		sameStringAsMarshal(t, "x"+string(r)+"y")
	}
	for _, s := range []string{"", "\xe2\x80", "\xe2\x80\xa8\xe2", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff\xfe", "a\xf0\x9f\x98", "<script>&amp;</script>", "\"\\\"\\"} {
		sameStringAsMarshal(t, s)
	}
}

func TestAppendStringWritesWhatMarshalWritesOfAnyString(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pieces := []string{"a", "\"", "\\", "\n", "\x00", "\x1f", "\x7f", "<", ">", "&", "é", "\u2028", "\u2029", "😀", "\xff", "\xe2\x80", "\xed\xa0\x80"}
		var b strings.Builder
		for range rapid.IntRange(0, 20).Draw(t, "pieces") {
			if rapid.Bool().Draw(t, "any") {
				b.WriteString(rapid.String().Draw(t, "s"))
			} else {
				b.WriteString(pieces[rapid.IntRange(0, len(pieces)-1).Draw(t, "piece")])
			}
		}
		sameStringAsMarshal(t, b.String())
	})
}

func sameRawAsMarshal(t interface{ Fatalf(string, ...any) }, raw string) {
	got, ok := jsonvalue.AppendRaw([]byte("p"), []byte(raw))
	want, err := json.Marshal(json.RawMessage(raw))
	same := err == nil && string(want) == raw
	if ok != same || ok && string(got) != "p"+raw || !ok && string(got) != "p" {
		t.Fatalf("AppendRaw(%q) = %q, %t; json.Marshal writes %q, %v", raw, got, ok, want, err)
	}
}

// FuzzAppendString holds AppendString to json.Marshal on any string, and
// AppendRaw on the same bytes read as a JSON text and as one quoted.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c\n\t\x01", "<>&", "\u2028\u2029", "\xff\xe2\x80", "é😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sameStringAsMarshal(t, s)
		sameRawAsMarshal(t, s)
		sameRawAsMarshal(t, `{"k":"`+s+`"}`)
		if got := jsonvalue.AppendString(nil, s); !utf8.Valid(got) {
			t.Fatalf("AppendString(%q) is not UTF-8: %q", s, got)
		}
	})
}

// AppendRaw writes a text itself exactly when json.Marshal of a
// json.RawMessage holding it writes it unchanged, and otherwise nothing.
func TestAppendRawTakesWhatMarshalLeavesAsItIs(t *testing.T) {
	check := sameRawAsMarshal
	for _, raw := range []string{``, `null`, `{}`, `{"a":1}`, `{"a": 1}`, `[1,2]`, ` 1`, `"<"`, `"\u003c"`, `"&"`, "\"\u2028\"", "\"\u2029\"", "\"\u2027\"", `"é"`,
		`{"a":`, `nul`, `1 2`, "\"\xff\"", `{"a":1,"a":2}`, `"\x"`, "\"\t\"", `{"cmd":"ls -la"}`, `"a\"b c"`, `"\\" `, `"\\"x"`, "\"\u2027\u2030\"", "\"\xe2\x80\"", "\"\xe2\x80\xa8\"", `"\u2028"`, `{"a":[1, 2]}`, "\"\xff\""} {
		check(t, raw)
	}
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		for range rapid.IntRange(0, 12).Draw(t, "tokens") {
			b.WriteString(rapid.SampledFrom(probeTokens).Draw(t, "token"))
		}
		check(t, b.String())
	})
}

// What Appended returns is the caller's: later calls, which reuse the
// buffer, do not change it; and it is just as long as what was written.
func TestAppendedReturnsASliceOfItsOwn(t *testing.T) {
	first, err := jsonvalue.Appended(func(buf []byte) ([]byte, error) { return append(buf, "first"...), nil })
	if err != nil || string(first) != "first" || cap(first) != len(first) {
		t.Fatalf("Appended = %q (cap %d), %v", first, cap(first), err)
	}
	for range 10 {
		if _, err := jsonvalue.Appended(func(buf []byte) ([]byte, error) { return append(buf, "SECOND"...), nil }); err != nil {
			t.Fatal(err)
		}
	}
	if string(first) != "first" {
		t.Fatalf("a later call changed an earlier result to %q", first)
	}
	boom := errors.New("boom")
	if out, err := jsonvalue.Appended(func(buf []byte) ([]byte, error) { return append(buf, "half"...), boom }); err != boom || out != nil {
		t.Fatalf("Appended of a failing write = %q, %v; want nil and its error", out, err)
	}
	big := strings.Repeat("x", 100<<10)
	if out, err := jsonvalue.Appended(func(buf []byte) ([]byte, error) { return append(buf, big...), nil }); err != nil || string(out) != big {
		t.Fatalf("Appended of %d bytes gave %d, %v", len(big), len(out), err)
	}
}

// AppendFloat64 writes every float as json.Marshal does: around each
// switch of notation, the extremes, negative zero, and any float rapid
// draws; it refuses what json.Marshal refuses.
func TestAppendFloat64WritesWhatMarshalWrites(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, f float64) {
		want, err := json.Marshal(f)
		got, ok := jsonvalue.AppendFloat64([]byte("p"), f)
		if ok != (err == nil) || ok && string(got) != "p"+string(want) || !ok && string(got) != "p" {
			t.Fatalf("AppendFloat64(%v) = %q, %t; json.Marshal writes %q, %v", f, got, ok, want, err)
		}
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1.5, 1e-6, 9.99e-7, 1e-7, 1.5e-10, 1e20, 1e21, 9.99e20, 1.2e21, 1e100, 5e-324,
		math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 123456789.125, math.Inf(1), math.Inf(-1), math.NaN()} {
		check(t, f)
		check(t, -f)
	}
	rapid.Check(t, func(t *rapid.T) { check(t, rapid.Float64().Draw(t, "f")) })
	rapid.Check(t, func(t *rapid.T) { check(t, math.Float64frombits(rapid.Uint64().Draw(t, "bits"))) })
}
