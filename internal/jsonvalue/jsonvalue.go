// Package jsonvalue reads JSON texts in one pass: Parse decodes one into
// the representation encoding/json gives an any with UseNumber (objects
// map[string]any, arrays []any, numbers json.Number), Valid only checks
// one, allocating nothing. Both agree with encoding/json on every input
// (the tests and the fuzz target hold them to it), and are faster.
package jsonvalue

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// parseDepthMax is how deeply arrays and objects may nest, as encoding/json
// allows.
const parseDepthMax = 10000

// Parse decodes one JSON text, space around it allowed, as encoding/json
// decodes it into an any with UseNumber: invalid UTF-8 and lone surrogate
// escapes become U+FFFD, and of a key given twice the last wins.
func Parse(data []byte) (any, error) {
	p := parser{data: data, build: true}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.data) {
		return nil, ErrTrailing
	}
	return v, nil
}

// ErrTrailing is Parse's error for a JSON value followed by more than
// space.
var ErrTrailing = errors.New("the value is followed by more data")

// Valid reports whether data is one JSON text, as json.Valid does (which,
// like it, checks the grammar, not that strings are UTF-8).
func Valid(data []byte) bool {
	p := parser{data: data}
	p.space()
	if _, err := p.value(0); err != nil {
		return false
	}
	p.space()
	return p.i == len(p.data)
}

// parser reads one JSON text from data, from offset i on; it builds the
// value only when build is set (Parse), and otherwise only checks it.
type parser struct {
	data  []byte
	i     int
	build bool
}

// syntaxError says what was found at the parser's offset.
func (p *parser) syntaxError(what string) error {
	if p.i >= len(p.data) {
		return fmt.Errorf("unexpected end of JSON input (want %s)", what)
	}
	return fmt.Errorf("invalid character %q at offset %d (want %s)", p.data[p.i], p.i, what)
}

func (p *parser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if p.i >= len(p.data) {
		return nil, p.syntaxError("a value")
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.string()
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, p.syntaxError("a value")
}

func (p *parser) literal(word string) error {
	if len(p.data)-p.i < len(word) || string(p.data[p.i:p.i+len(word)]) != word {
		for k := 0; k < len(word) && p.i < len(p.data) && p.data[p.i] == word[k]; k++ {
			p.i++
		}
		return p.syntaxError("the literal " + word)
	}
	p.i += len(word)
	return nil
}

func (p *parser) object(depth int) (any, error) {
	if depth > parseDepthMax {
		return nil, errors.New("exceeded max depth")
	}
	p.i++ // {
	var m map[string]any
	if p.build {
		m = map[string]any{}
	}
	p.space()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return m, nil
	}
	for {
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, p.syntaxError("a string key")
		}
		k, err := p.string()
		if err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return nil, p.syntaxError("a colon after an object key")
		}
		p.i++
		p.space()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		if p.build {
			m[k] = v
		}
		switch more, err := p.more('}', "a comma or the end of an object"); {
		case err != nil:
			return nil, err
		case !more:
			return m, nil
		}
	}
}

func (p *parser) array(depth int) (any, error) {
	if depth > parseDepthMax {
		return nil, errors.New("exceeded max depth")
	}
	p.i++ // [
	var a []any
	if p.build {
		a = []any{}
	}
	p.space()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return a, nil
	}
	for {
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		if p.build {
			a = append(a, v)
		}
		switch more, err := p.more(']', "a comma or the end of an array"); {
		case err != nil:
			return nil, err
		case !more:
			return a, nil
		}
	}
}

// more reads what follows a member of an object or array: a comma, and
// another member follows (true), or the closing byte (false); anything
// else is an error wanting what.
func (p *parser) more(closing byte, what string) (bool, error) {
	p.space()
	if p.i < len(p.data) {
		switch p.data[p.i] {
		case ',':
			p.i++
			p.space()
			return true, nil
		case closing:
			p.i++
			return false, nil
		}
	}
	return false, p.syntaxError(what)
}

// number reads a number as the grammar spells it and keeps its text.
func (p *parser) number() (any, error) {
	start := p.i
	if err := p.scanNumber(); err != nil || !p.build {
		return nil, err
	}
	return json.Number(p.data[start:p.i]), nil
}

// scanNumber reads a number, checking its grammar, and keeps nothing.
func (p *parser) scanNumber() error {
	if p.data[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.data) && p.data[p.i] == '0':
		p.i++
	case p.i < len(p.data) && p.data[p.i] >= '1' && p.data[p.i] <= '9':
		p.digits()
	default:
		return p.syntaxError("a digit")
	}
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		if !p.digits() {
			return p.syntaxError("a digit after the decimal point")
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return p.syntaxError("a digit in the exponent")
		}
	}
	return nil
}

// digits skips one or more digits and reports whether there was one.
func (p *parser) digits() bool {
	start := p.i
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

// string reads a string at the parser's quote. A string without escapes
// or bytes to replace is one copy of its bytes.
func (p *parser) string() (string, error) {
	p.i++ // "
	start := p.i
	plain := &plainBytes[0]
	if !p.build {
		plain = &plainBytes[1]
	}
	p.i = plainRun(p.data, p.i, p.build)
	for p.i < len(p.data) {
		c := p.data[p.i]
		if plain[c] {
			p.i++
			continue
		}
		switch {
		case c == '"':
			var s string
			if p.build {
				s = string(p.data[start:p.i])
			}
			p.i++
			return s, nil
		case c == '\\' || c >= utf8.RuneSelf && p.build:
			return p.slowString(start)
		case c < 0x20:
			return "", p.syntaxError("no control character in a string")
		}
		p.i++
	}
	return "", p.syntaxError("the end of a string")
}

// plainRun returns where the run of plain string bytes (plainBytes) from i
// may end, reading eight at a time: at the first word that holds a quote,
// a backslash or a control character (or, when ascii is set, a byte
// outside ASCII), from where the caller goes on byte by byte. It never
// passes a byte that is not plain.
func plainRun(b []byte, i int, ascii bool) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	stop := uint64(0)
	if ascii {
		stop = highs
	}
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		quote, backslash := x^(ones*'"'), x^(ones*'\\')
		special := (quote-ones)&^quote | (backslash-ones)&^backslash | (x-ones*0x20)&^x
		if (special&highs)|(x&stop) != 0 {
			break
		}
	}
	return i
}

// plainBytes says which bytes a string holds as they are, needing neither
// unescaping nor replacing: all but the quote, the backslash and control
// characters, and, when the string is built ([0]), bytes outside ASCII.
var plainBytes = func() (t [2][256]bool) {
	for c := 0x20; c < 256; c++ {
		t[1][c] = c != '"' && c != '\\'
		t[0][c] = t[1][c] && c < utf8.RuneSelf
	}
	return t
}()

// slowString goes on reading the string that began at start from the
// parser's offset, unescaping and replacing what encoding/json does when
// it builds the string, only checking the escapes when it does not.
func (p *parser) slowString(start int) (string, error) {
	var b []byte
	if p.build {
		b = make([]byte, p.i-start, p.i-start+16)
		copy(b, p.data[start:p.i])
	}
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), nil
		case c < 0x20:
			return "", p.syntaxError("no control character in a string")
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			if p.build {
				b = utf8.AppendRune(b, r)
			}
		case c < utf8.RuneSelf || !p.build:
			if p.build {
				b = append(b, c)
			}
			p.i++
		default:
			r, size := utf8.DecodeRune(p.data[p.i:])
			b = utf8.AppendRune(b, r) // an invalid byte decodes to U+FFFD
			p.i += size
		}
	}
	return "", p.syntaxError("the end of a string")
}

// escape reads the escape at the parser's backslash: the rune it stands
// for.
func (p *parser) escape() (rune, error) {
	p.i++ // \
	if p.i >= len(p.data) {
		return 0, p.syntaxError("an escape")
	}
	c := p.data[p.i]
	p.i++
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r := hex4(p.data[p.i:])
		if r < 0 {
			return 0, p.syntaxError("four hexadecimal digits after \\u")
		}
		p.i += 4
		if utf16.IsSurrogate(r) {
			// A pair when a low surrogate's escape follows at once; a lone
			// half is U+FFFD, and what follows is read on its own.
			if len(p.data)-p.i >= 6 && p.data[p.i] == '\\' && p.data[p.i+1] == 'u' {
				if r2 := hex4(p.data[p.i+2:]); r2 >= 0 {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						p.i += 6
						return d, nil
					}
				}
			}
			r = utf8.RuneError
		}
		return r, nil
	}
	p.i--
	return 0, p.syntaxError("an escape character")
}

// hex4 is the rune the first four bytes of s spell in hexadecimal, or -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
