package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// ValidationError is a value that does not match its schema, naming where.
type ValidationError struct {
	Path   string // a JSON path into the value: entries[2].model
	Reason string
}

func (e *ValidationError) Error() string {
	p := e.Path
	if p == "" {
		p = "(root)"
	}
	return fmt.Sprintf("schema: %s: %s", p, e.Reason)
}

// Validate checks data against a schema file's document, for the keywords
// the generator emits: type, enum, const, properties, required,
// additionalProperties, items, prefixItems, minItems, maxItems,
// minProperties, maxProperties, anyOf and local $ref. Any other keyword is
// an error, so a schema cannot silently ask for more than is checked.
func Validate(schemaDoc, data []byte) error {
	var root map[string]any
	if err := json.Unmarshal(schemaDoc, &root); err != nil {
		return fmt.Errorf("schema: the schema is not JSON: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return &ValidationError{"", "not JSON: " + err.Error()}
	}
	return (&validator{root: root}).check("", root, v)
}

type validator struct {
	root map[string]any
}

var known = map[string]bool{
	"$schema": true, "$id": true, "title": true, "$defs": true, "$ref": true, "type": true, "enum": true, "const": true,
	"properties": true, "required": true, "additionalProperties": true, "items": true, "prefixItems": true,
	"minItems": true, "maxItems": true, "minProperties": true, "maxProperties": true, "anyOf": true,
}

func (vd *validator) check(path string, s map[string]any, v any) error {
	for k := range s {
		if !known[k] {
			return fmt.Errorf("schema: keyword %q is not one this validator checks", k)
		}
	}
	fail := func(format string, args ...any) error {
		return &ValidationError{path, fmt.Sprintf(format, args...)}
	}
	if ref, ok := s["$ref"].(string); ok {
		name, ok := strings.CutPrefix(ref, "#/$defs/")
		defs, _ := vd.root["$defs"].(map[string]any)
		def, found := defs[name].(map[string]any)
		if !ok || !found {
			return fmt.Errorf("schema: unresolved $ref %q", ref)
		}
		if err := vd.check(path, def, v); err != nil {
			return err
		}
	}
	if t, ok := s["type"]; ok {
		var types []string
		switch x := t.(type) {
		case string:
			types = []string{x}
		case []any:
			for _, e := range x {
				types = append(types, e.(string))
			}
		}
		if !slices.ContainsFunc(types, func(t string) bool { return isType(t, v) }) {
			return fail("%s is not %s", kindOf(v), strings.Join(types, " or "))
		}
	}
	if e, ok := s["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return equal(x, v) }) {
		return fail("%s is not one of %s", show(v), show(e))
	}
	if c, ok := s["const"]; ok && !equal(c, v) {
		return fail("%s is not %s", show(v), show(c))
	}
	if alts, ok := s["anyOf"].([]any); ok {
		var errs []string
		matched := false
		for _, alt := range alts {
			err := vd.check(path, alt.(map[string]any), v)
			if err == nil {
				matched = true
				break
			}
			errs = append(errs, err.Error())
		}
		if !matched {
			return fail("matches no alternative: %s", strings.Join(errs, "; "))
		}
	}
	switch x := v.(type) {
	case map[string]any:
		return vd.object(path, s, x)
	case []any:
		return vd.array(path, s, x)
	}
	return nil
}

func (vd *validator) object(path string, s map[string]any, o map[string]any) error {
	fail := func(format string, args ...any) error {
		return &ValidationError{path, fmt.Sprintf(format, args...)}
	}
	if n, ok := number(s["minProperties"]); ok && len(o) < n {
		return fail("%d members; want at least %d", len(o), n)
	}
	if n, ok := number(s["maxProperties"]); ok && len(o) > n {
		return fail("%d members; want at most %d", len(o), n)
	}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if _, ok := o[r.(string)]; !ok {
				return fail("member %q is required", r)
			}
		}
	}
	props, _ := s["properties"].(map[string]any)
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := join(path, k)
		if ps, ok := props[k].(map[string]any); ok {
			if err := vd.check(p, ps, o[k]); err != nil {
				return err
			}
			continue
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if !ap {
				return fail("member %q is not allowed", k)
			}
		case map[string]any:
			if err := vd.check(p, ap, o[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (vd *validator) array(path string, s map[string]any, a []any) error {
	fail := func(format string, args ...any) error {
		return &ValidationError{path, fmt.Sprintf(format, args...)}
	}
	if n, ok := number(s["minItems"]); ok && len(a) < n {
		return fail("%d items; want at least %d", len(a), n)
	}
	if n, ok := number(s["maxItems"]); ok && len(a) > n {
		return fail("%d items; want at most %d", len(a), n)
	}
	prefix, _ := s["prefixItems"].([]any)
	for i, e := range a {
		p := fmt.Sprintf("%s[%d]", path, i)
		var es map[string]any
		if i < len(prefix) {
			es = prefix[i].(map[string]any)
		} else if it, ok := s["items"].(map[string]any); ok {
			es = it
		}
		if es != nil {
			if err := vd.check(p, es, e); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func number(x any) (int, bool) {
	f, ok := x.(float64)
	return int(f), ok
}

func isType(t string, v any) bool {
	switch t {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	}
	return false
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	}
	return "an object"
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// equal compares a schema's value (numbers as float64) with a datum's
// (numbers as json.Number) by their JSON text.
func equal(schemaVal, v any) bool {
	if n, ok := v.(json.Number); ok {
		f, err := n.Float64()
		sf, ok := schemaVal.(float64)
		return err == nil && ok && f == sf
	}
	return show(schemaVal) == show(v)
}
