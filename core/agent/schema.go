package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/pico-go/pico/internal/plant"
)

// argsSchema is a tool's parameters compiled by a maintained JSON Schema
// validator (draft 2020-12 unless the schema names another), so that every
// keyword a model could break (minLength, pattern, minimum, oneOf, $ref, ...)
// is enforced before the tool runs, not a subset of them. A schema may not
// load anything from outside itself: references resolve within the tool's
// own document.
type argsSchema struct {
	compiled *jsonschema.Schema
}

// compileSchema compiles a tool's parameters; the error says why a schema
// is not one.
func compileSchema(tool string, params json.RawMessage) (*argsSchema, error) {
	key := tool + "\x00" + string(params)
	if s, ok := compiledSchemas.Load(key); ok {
		return s.(*argsSchema), nil
	}
	s, err := compileSchemaFresh(tool, params)
	if err == nil {
		compiledSchemas.Store(key, s)
	}
	return s, err
}

// compiledSchemas caches compiled tool schemas process-wide, by tool name
// and schema text: every session opens with the same built-in tools, and a
// compiled schema is immutable and safe for concurrent validation.
var compiledSchemas sync.Map

func compileSchemaFresh(tool string, params json.RawMessage) (*argsSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return nil, fmt.Errorf("parameters are not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // nothing is loaded from files or the network
	url := "tool:" + tool
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("parameters are not a JSON schema: %w", err)
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("parameters are not a JSON schema: %w", err)
	}
	return &argsSchema{compiled: compiled}, nil
}

// validate checks a call's arguments. The error the model sees names each
// failing location as a JSON pointer into the arguments, in a stable order.
func (s *argsSchema) validate(args json.RawMessage) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("arguments are not JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("arguments are %s, not an object", jsonType(v))
	}
	err = s.compiled.Validate(v)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	var found []string
	collectFailures(ve, &found)
	slices.Sort(found) // property order is a map's: keep the text deterministic
	if plant.On("args-first-failure-only") {
		found = found[:1]
	}
	return errors.New(strings.Join(slices.Compact(found), "; "))
}

// schemaPrinter renders the validator's messages.
var schemaPrinter = message.NewPrinter(language.English)

// collectFailures lists every failing keyword under e with its location as
// a JSON pointer into the arguments; a schema, a $ref or a group of
// failures at one location that failed only because something inside it
// did says nothing of its own.
func collectFailures(e *jsonschema.ValidationError, out *[]string) {
	switch e.ErrorKind.(type) {
	case *kind.Schema, *kind.Reference, *kind.Group:
	default:
		*out = append(*out, fmt.Sprintf("at %s: %s", jsonPointer(e.InstanceLocation), e.ErrorKind.LocalizedString(schemaPrinter)))
	}
	for _, c := range e.Causes {
		collectFailures(c, out)
	}
}

// jsonPointer writes a location as a JSON pointer ("/" for the whole).
func jsonPointer(tokens []string) string {
	if len(tokens) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, t := range tokens {
		if plant.On("args-pointer-unescaped") {
			b.WriteString("/" + t)
			continue
		}
		b.WriteString("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
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
