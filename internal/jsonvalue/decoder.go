package jsonvalue

import (
	"strconv"
	"strings"
	"unsafe"
)

// Decoder reads one JSON text a value at a time, for a decoder written by
// hand that must give exactly what encoding/json gives. It is only a fast
// path: every method reports false when it meets something it does not
// decode the way encoding/json would (a malformed text, a value of another
// kind, a number out of range, a key with escapes), and the caller then
// decodes the whole text with encoding/json, which says what the text
// means or what is wrong with it. A caller therefore never turns a false
// into an error of its own, and never reads on after a false: where the
// decoder stands then is undefined.
type Decoder struct {
	p     parser
	depth int
}

// NewDecoder returns a decoder of data, at its first value.
func NewDecoder(data []byte) *Decoder {
	d := &Decoder{p: parser{data: data, build: true}}
	d.p.space()
	return d
}

// End reports whether only space is left after the values read.
func (d *Decoder) End() bool {
	d.p.space()
	return d.p.i == len(d.p.data)
}

// Peek returns the first byte of the next value, 0 at the end: a caller
// that reads one of several kinds of value chooses by it.
func (d *Decoder) Peek() byte { return d.next() }

// next is the first byte of the next value, 0 at the end.
func (d *Decoder) next() byte {
	if d.p.i >= len(d.p.data) {
		return 0
	}
	return d.p.data[d.p.i]
}

// Null reads the next value if it is null, and reports whether it was;
// when it was not, the decoder stays where it was, for the caller to read
// the value as what it is.
func (d *Decoder) Null() bool {
	if rest := d.p.data[d.p.i:]; len(rest) < 4 || string(rest[:4]) != "null" {
		return false
	}
	d.p.i += 4
	return true
}

// Object reads an object, calling member for each key with the decoder at
// the key's value, which member must read. The key is the text between
// the quotes, valid only during the call; a key with an escape or a byte
// outside ASCII, or a member returning false, stops the object with false.
func (d *Decoder) Object(member func(key []byte) bool) bool {
	if d.next() != '{' || d.depth >= parseDepthMax {
		return false
	}
	d.depth++
	defer func() { d.depth-- }()
	d.p.i++
	d.p.space()
	if d.next() == '}' {
		d.p.i++
		return true
	}
	for {
		key, ok := d.plainString()
		if !ok {
			return false
		}
		d.p.space()
		if d.next() != ':' {
			return false
		}
		d.p.i++
		d.p.space()
		if !member(key) {
			return false
		}
		if more, err := d.p.more('}', ""); err != nil {
			return false
		} else if !more {
			return true
		}
	}
}

// plainString reads a string without escapes or bytes outside ASCII, and
// returns its text in place.
func (d *Decoder) plainString() ([]byte, bool) {
	if d.next() != '"' {
		return nil, false
	}
	start := d.p.i + 1
	for i := plainRun(d.p.data, start, true); i < len(d.p.data); i++ {
		switch c := d.p.data[i]; {
		case c == '"':
			d.p.i = i + 1
			return d.p.data[start:i], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// Array reads an array, calling elem with the decoder at each element,
// which elem must read; elem returning false stops the array with false.
func (d *Decoder) Array(elem func() bool) bool {
	if d.next() != '[' || d.depth >= parseDepthMax {
		return false
	}
	d.depth++
	defer func() { d.depth-- }()
	d.p.i++
	d.p.space()
	if d.next() == ']' {
		d.p.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		if more, err := d.p.more(']', ""); err != nil {
			return false
		} else if !more {
			return true
		}
	}
}

// String reads a string as encoding/json decodes it into a string: escapes
// decoded, invalid UTF-8 and lone surrogates as U+FFFD.
func (d *Decoder) String() (string, bool) {
	if d.next() != '"' {
		return "", false
	}
	s, err := d.p.string()
	return s, err == nil
}

// number reads a number and returns its text, in place.
func (d *Decoder) number() ([]byte, bool) {
	if c := d.next(); c != '-' && (c < '0' || c > '9') {
		return nil, false
	}
	start := d.p.i
	if err := d.p.scanNumber(); err != nil {
		return nil, false
	}
	return d.p.data[start:d.p.i], true
}

// Int64 reads a number as encoding/json decodes it into an int64: an
// integer in range, with neither fraction nor exponent.
func (d *Decoder) Int64() (int64, bool) {
	text, ok := d.number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(unsafeString(text), 10, 64)
	return n, err == nil
}

// Float64 reads a number as encoding/json decodes it into a float64.
func (d *Decoder) Float64() (float64, bool) {
	text, ok := d.number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(unsafeString(text), 64)
	return f, err == nil
}

// Bool reads true or false.
func (d *Decoder) Bool() (v, ok bool) {
	switch d.next() {
	case 't':
		return true, d.p.literal("true") == nil
	case 'f':
		return false, d.p.literal("false") == nil
	}
	return false, false
}

// Raw reads any value and returns a copy of its bytes, as a
// json.RawMessage field holds them.
func (d *Decoder) Raw() ([]byte, bool) {
	v, ok := d.Value()
	if !ok {
		return nil, false
	}
	return append([]byte(nil), v...), true
}

// Value reads any value and returns its bytes in place, as encoding/json
// passes them to an UnmarshalJSON method.
func (d *Decoder) Value() ([]byte, bool) {
	start := d.p.i
	if !d.Skip() {
		return nil, false
	}
	return d.p.data[start:d.p.i], true
}

// Skip reads any value, checking its grammar, and keeps nothing of it.
func (d *Decoder) Skip() bool {
	build := d.p.build
	d.p.build = false
	_, err := d.p.value(d.depth)
	d.p.build = build
	return err == nil
}

// FoldsTo reports whether key would match one of names only as
// encoding/json matches keys to fields when no name is the same: without
// regard to case. A decoder that ignores unknown keys calls it on a key it
// does not know, and gives up on its fast path when it is true.
func FoldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if strings.EqualFold(unsafeString(key), n) {
			return true
		}
	}
	return false
}

// unsafeString is b as a string without copying, for a call that keeps
// nothing of it (strconv copies the text into its errors).
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
