package delta

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// parseDepthMax is how deeply arrays and objects may nest, as encoding/json
// allows.
const parseDepthMax = 10000

// ParseValue decodes one JSON value into this package's representation
// (numbers as json.Number). Invalid UTF-8 and lone surrogate escapes become
// U+FFFD, as encoding/json does everywhere; of a key given twice the last
// wins. It decodes exactly what encoding/json decodes into an any with
// UseNumber, in one pass over data and without its buffering.
func ParseValue(data []byte) (any, error) {
	p := parser{data: data}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, fmt.Errorf("delta: value is not JSON: %w", err)
	}
	p.space()
	if p.i != len(p.data) {
		return nil, errors.New("delta: value is followed by more data")
	}
	return v, nil
}

// parser reads one JSON text from data, from offset i on.
type parser struct {
	data []byte
	i    int
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
	m := map[string]any{}
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
		m[k] = v
		p.space()
		if p.i < len(p.data) {
			switch p.data[p.i] {
			case ',':
				p.i++
				p.space()
				continue
			case '}':
				p.i++
				return m, nil
			}
		}
		return nil, p.syntaxError("a comma or the end of an object")
	}
}

func (p *parser) array(depth int) (any, error) {
	if depth > parseDepthMax {
		return nil, errors.New("exceeded max depth")
	}
	p.i++ // [
	a := []any{}
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
		a = append(a, v)
		p.space()
		if p.i < len(p.data) {
			switch p.data[p.i] {
			case ',':
				p.i++
				p.space()
				continue
			case ']':
				p.i++
				return a, nil
			}
		}
		return nil, p.syntaxError("a comma or the end of an array")
	}
}

// number reads a number as the grammar spells it and keeps its text.
func (p *parser) number() (any, error) {
	start := p.i
	if p.data[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.data) && p.data[p.i] == '0':
		p.i++
	case p.i < len(p.data) && p.data[p.i] >= '1' && p.data[p.i] <= '9':
		p.digits()
	default:
		return nil, p.syntaxError("a digit")
	}
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		if !p.digits() {
			return nil, p.syntaxError("a digit after the decimal point")
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return nil, p.syntaxError("a digit in the exponent")
		}
	}
	return jsonNumber(p.data[start:p.i]), nil
}

func jsonNumber(b []byte) json.Number { return json.Number(b) }

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
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			s := string(p.data[start:p.i])
			p.i++
			return s, nil
		case c == '\\' || c >= utf8.RuneSelf:
			return p.slowString(start)
		case c < 0x20:
			return "", p.syntaxError("no control character in a string")
		}
		p.i++
	}
	return "", p.syntaxError("the end of a string")
}

// slowString goes on reading the string that began at start, unescaping
// and replacing what encoding/json does, from the parser's offset.
func (p *parser) slowString(start int) (string, error) {
	b := make([]byte, p.i-start, p.i-start+16)
	copy(b, p.data[start:p.i])
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), nil
		case c < 0x20:
			return "", p.syntaxError("no control character in a string")
		case c < utf8.RuneSelf && c != '\\':
			b = append(b, c)
			p.i++
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(p.data[p.i:])
			b = utf8.AppendRune(b, r) // an invalid byte decodes to U+FFFD
			p.i += size
		default:
			var err error
			if b, err = p.escape(b); err != nil {
				return "", err
			}
		}
	}
	return "", p.syntaxError("the end of a string")
}

// escape appends the escape at the parser's backslash to b.
func (p *parser) escape(b []byte) ([]byte, error) {
	p.i++ // \
	if p.i >= len(p.data) {
		return nil, p.syntaxError("an escape")
	}
	c := p.data[p.i]
	p.i++
	switch c {
	case '"', '\\', '/':
		return append(b, c), nil
	case 'b':
		return append(b, '\b'), nil
	case 'f':
		return append(b, '\f'), nil
	case 'n':
		return append(b, '\n'), nil
	case 'r':
		return append(b, '\r'), nil
	case 't':
		return append(b, '\t'), nil
	case 'u':
		r := hex4(p.data[p.i:])
		if r < 0 {
			return nil, p.syntaxError("four hexadecimal digits after \\u")
		}
		p.i += 4
		if utf16.IsSurrogate(r) {
			// A pair when a low surrogate's escape follows at once; a lone
			// half is U+FFFD, and what follows is read on its own.
			if len(p.data)-p.i >= 6 && p.data[p.i] == '\\' && p.data[p.i+1] == 'u' {
				if r2 := hex4(p.data[p.i+2:]); r2 >= 0 {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						p.i += 6
						return utf8.AppendRune(b, d), nil
					}
				}
			}
			r = utf8.RuneError
		}
		return utf8.AppendRune(b, r), nil
	}
	p.i--
	return nil, p.syntaxError("an escape character")
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
