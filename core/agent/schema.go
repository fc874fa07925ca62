package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// schema is the subset of JSON Schema the harness checks tool arguments
// against before invoking anything: an object's required properties, each
// property's type (recursively for objects and array items), enums, and
// additionalProperties: false. Keywords outside the subset are accepted and
// not enforced; a tool that needs more validates in its Execute.
type schema struct {
	Type                 any                `json:"type"`
	Properties           map[string]*schema `json:"properties"`
	Required             []string           `json:"required"`
	Items                *schema            `json:"items"`
	Enum                 []json.RawMessage  `json:"enum"`
	AdditionalProperties *bool              `json:"-"`
}

func (s *schema) UnmarshalJSON(data []byte) error {
	type plain schema
	var p struct {
		plain
		AdditionalProperties json.RawMessage `json:"additionalProperties"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*s = schema(p.plain)
	if string(p.AdditionalProperties) == "false" {
		no := false
		s.AdditionalProperties = &no
	}
	return nil
}

func parseSchema(raw json.RawMessage) (*schema, error) {
	var s schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("parameters are not a JSON schema object: %w", err)
	}
	return &s, nil
}

// validateArgs checks a call's arguments against its tool's parameters.
// The error names the offending property.
func validateArgs(params, args json.RawMessage) error {
	s, err := parseSchema(params)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("arguments are not JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("arguments are %s, not an object", jsonType(v))
	}
	return s.check("arguments", v)
}

func (s *schema) check(path string, v any) error {
	if s == nil {
		return nil
	}
	if types := s.types(); len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return typeMatches(t, v) }) {
		return fmt.Errorf("%s is %s, not %s", path, jsonType(v), strings.Join(types, " or "))
	}
	if len(s.Enum) > 0 {
		raw, _ := json.Marshal(v)
		if !slices.ContainsFunc(s.Enum, func(e json.RawMessage) bool { return sameJSON(e, raw) }) {
			return fmt.Errorf("%s is %s, not one of the allowed values", path, raw)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for _, r := range s.Required {
			if _, ok := x[r]; !ok {
				return fmt.Errorf("%s.%s is required", path, r)
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p, declared := s.Properties[k]
			if !declared && s.AdditionalProperties != nil && !*s.AdditionalProperties {
				return fmt.Errorf("%s.%s is not a known property", path, k)
			}
			if err := p.check(path+"."+k, x[k]); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := s.Items.check(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *schema) types() []string {
	switch t := s.Type.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if str, ok := e.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

func typeMatches(t string, v any) bool {
	switch t {
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	case "number":
		_, ok := v.(json.Number)
		return ok
	}
	return jsonType(v) == t
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
