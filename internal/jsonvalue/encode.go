package jsonvalue

import (
	"math"
	"strconv"
	"sync"
	"unicode/utf8"
)

// AppendString appends s to buf as a JSON string exactly as json.Marshal
// writes a Go string: quoted; the quote, the backslash and the control
// characters escaped (\b, \f, \n, \r and \t by name, the rest as \u00XX);
// <, > and & as \u003c, \u003e and \u0026, for HTML; U+2028 and U+2029 as
// \u2028 and \u2029, for JavaScript; and each byte of invalid UTF-8 as
// \ufffd.
func AppendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !stringEscaped[c] {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

const hexDigits = "0123456789abcdef"

// stringEscaped are the ASCII bytes AppendString escapes.
var stringEscaped = func() (t [utf8.RuneSelf]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = true
	}
	return t
}()

// AppendRaw appends raw, a JSON text, to buf as json.Marshal writes a
// json.RawMessage holding it, when that is raw itself (Verbatim). It
// reports false, appending nothing, for any other text, which the caller
// leaves to encoding/json.
func AppendRaw(buf, raw []byte) ([]byte, bool) {
	if !Verbatim(raw) {
		return buf, false
	}
	return append(buf, raw...), true
}

// Verbatim reports whether json.Marshal writes a json.RawMessage holding
// raw as raw itself: raw is valid and compact (no space outside strings),
// with no <, > or & and no U+2028 or U+2029, which encoding/json escapes.
func Verbatim(raw []byte) bool { return VerbatimIfValid(raw) && Valid(raw) }

// VerbatimIfValid is Verbatim without the check that raw is valid JSON,
// for a caller that parses raw anyway: it looks at raw's bytes only.
func VerbatimIfValid(raw []byte) bool {
	inString := false
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			inString = !inString
		case '\\':
			if inString {
				i++ // the escaped byte, a quote perhaps
			}
		case ' ', '\t', '\n', '\r':
			if !inString {
				return false
			}
		case '<', '>', '&':
			return false
		case 0xe2: // U+2028 and U+2029 are E2 80 A8 and E2 80 A9
			if i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xa8 {
				return false
			}
		}
	}
	return true
}

// Appended returns what write appends to an empty buffer, in a slice of
// its own of just that length: write appends to a buffer reused from call
// to call, so a value written by pieces costs one allocation.
func Appended(write func(buf []byte) ([]byte, error)) ([]byte, error) {
	bp := appendBuffers.Get().(*[]byte)
	out, err := write((*bp)[:0])
	var b []byte
	if err == nil {
		b = append(make([]byte, 0, len(out)), out...)
	}
	if cap(out) <= appendBufferMax {
		*bp = out[:0]
	}
	appendBuffers.Put(bp)
	return b, err
}

// appendBufferMax is the largest buffer Appended keeps for reuse.
const appendBufferMax = 64 << 10

var appendBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 512)
	return &b
}}

// AppendFloat64 appends f as json.Marshal writes a float64: the shortest
// text that reads back as f, in decimal notation but for magnitudes below
// 1e-6 or from 1e21, which take an exponent of at least one digit. It
// reports false, appending nothing, for infinities and NaN, which
// json.Marshal refuses.
func AppendFloat64(buf []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return buf, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		// e-07 is written e-7.
		if n := len(buf); n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf, true
}
