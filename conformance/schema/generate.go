// Package schema generates the JSON Schemas (draft 2020-12) of every record
// and message a port exchanges with the conformance kit — entries, tasks,
// conversations, input results, inbox items, usage rows, views, events,
// delta ops, the protocol's requests and replies, and outcomes — from the
// Go types by reflection, and validates JSON against them with a validator
// for exactly the keywords the generator emits.
//
// The files live in fixtures/schema/v1; `go test ./conformance/schema
// -update` regenerates them. Types with their own JSON encoders (content
// that is a string or blocks, events shaped by their type, delta ops as
// tuples, scopes, ids that are numbers or strings) have their shapes
// written out here, next to the reflection, with the encoder they follow.
//
// Why not a library: the module keeps to the standard library plus a few
// test tools (DESIGN §8), the schemas use a dozen keywords, and a
// generator and validator for those are shorter than the glue a general
// library would need for the hand-written shapes above.
package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/pico-go/pico/conformance/kit"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/storage"
)

// Version is the schemas' version, the directory they live in.
const Version = "v1"

// Draft is the JSON Schema dialect.
const Draft = "https://json-schema.org/draft/2020-12/schema"

// idBase prefixes every schema's $id.
const idBase = "https://github.com/pico-go/pico/fixtures/schema/" + Version + "/"

// Root is one schema file: its name and the Go type it describes.
type Root struct {
	Name string
	Type reflect.Type
}

// Roots are the schema files, one per record or message.
var Roots = []Root{
	{"entry", reflect.TypeFor[storage.Entry]()},
	{"task", reflect.TypeFor[storage.Task]()},
	{"conversation", reflect.TypeFor[storage.Conversation]()},
	{"input-result", reflect.TypeFor[agent.InputResult]()},
	{"inbox-item", reflect.TypeFor[agent.InboxItem]()},
	{"usage-row", reflect.TypeFor[agent.UsageRow]()},
	{"conversation-view", reflect.TypeFor[core.ConversationView]()},
	{"conversation-event", reflect.TypeFor[core.ConversationEvent]()},
	{"delta-op", reflect.TypeFor[delta.Op]()},
	{"request", reflect.TypeFor[kit.Request]()},
	{"reply", reflect.TypeFor[kit.Reply]()},
	{"outcome", reflect.TypeFor[kit.Outcome]()},
}

// S is a schema as the generator writes it.
type S = map[string]any

var (
	rawType     = reflect.TypeFor[json.RawMessage]()
	anyType     = reflect.TypeFor[any]()
	idType      = reflect.TypeFor[storage.ID]()
	kitIDType   = reflect.TypeFor[kit.ID]()
	contentType = reflect.TypeFor[ai.Content]()
	eventType   = reflect.TypeFor[core.ConversationEvent]()
	opType      = reflect.TypeFor[delta.Op]()
	scopeType   = reflect.TypeFor[storage.Scope]()
	draftType   = reflect.TypeFor[agent.AcceptedEntryDraft]()
	markerType  = reflect.TypeFor[json.Marshaler]()
	// ownFields are the structs whose JSON encoders write their own fields
	// as encoding/json does (by hand, for speed), so that their schema is
	// their fields'.
	ownFields = map[reflect.Type]bool{reflect.TypeFor[ai.Block](): true}
)

// generator collects the named types a root refers to into $defs.
type generator struct {
	defs map[string]S
}

// Generate is root's schema file.
func Generate(r Root) S {
	g := &generator{defs: map[string]S{}}
	top := g.schema(r.Type)
	out := S{"$schema": Draft, "$id": idBase + r.Name + ".schema.json", "title": r.Type.String()}
	for k, v := range top {
		out[k] = v
	}
	if len(g.defs) > 0 {
		defs := S{}
		for k, v := range g.defs {
			defs[k] = v
		}
		out["$defs"] = defs
	}
	return out
}

// Marshal is a schema's file bytes: indented, keys sorted, a final newline.
func Marshal(s S) []byte {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic("schema: a schema always marshals: " + err.Error())
	}
	return append(b, '\n')
}

func defName(t reflect.Type) string {
	return strings.ReplaceAll(t.String(), ".", "_")
}

// ref names t in $defs, generating it once.
func (g *generator) ref(t reflect.Type, gen func() S) S {
	name := defName(t)
	if _, ok := g.defs[name]; !ok {
		g.defs[name] = S{} // a recursive type refers to itself
		g.defs[name] = gen()
	}
	return S{"$ref": "#/$defs/" + name}
}

func (g *generator) schema(t reflect.Type) S {
	if s, ok := g.special(t); ok {
		return s
	}
	if t.Implements(markerType) && t.Kind() == reflect.Struct && !ownFields[t] {
		panic(fmt.Sprintf("schema: %s has its own JSON encoder and no shape here", t))
	}
	switch t.Kind() {
	case reflect.Bool:
		return S{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return S{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return S{"type": "number"}
	case reflect.String:
		return S{"type": "string"}
	case reflect.Pointer:
		return nullable(g.schema(t.Elem()))
	case reflect.Slice, reflect.Array:
		return nullable(S{"type": "array", "items": g.schema(t.Elem())})
	case reflect.Map:
		return nullable(S{"type": "object", "additionalProperties": g.schema(t.Elem())})
	case reflect.Interface:
		return S{}
	case reflect.Struct:
		return g.ref(t, func() S { return g.object(t, nil) })
	}
	panic(fmt.Sprintf("schema: no schema for %s", t))
}

// object is a struct's schema: its JSON fields (embedded structs' fields
// inline), required unless omitempty, and nothing else.
func (g *generator) object(t reflect.Type, extra S) S {
	props := S{}
	var required []string
	g.fields(t, props, &required)
	for k, v := range extra {
		props[k] = v
	}
	s := S{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func (g *generator) fields(t reflect.Type, props S, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			g.fields(f.Type, props, required)
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = g.schema(f.Type)
		if !strings.Contains(opts, "omitempty") {
			*required = append(*required, name)
		}
	}
}

func nullable(s S) S {
	out := S{}
	for k, v := range s {
		out[k] = v
	}
	if t, ok := s["type"].(string); ok {
		out["type"] = []any{t, "null"}
	}
	return out
}

// special is the shape of a type with its own encoder, or of raw JSON.
func (g *generator) special(t reflect.Type) (S, bool) {
	switch t {
	case rawType, anyType:
		return S{}, true
	case idType:
		return S{"type": "integer"}, true
	case kitIDType: // kit.ID.MarshalJSON: a number or a string
		return S{"type": []any{"integer", "string"}}, true
	case contentType: // ai.Content.MarshalJSON: a bare string or blocks
		return S{"anyOf": []any{S{"type": "string"}, S{"type": "array", "items": g.schema(reflect.TypeFor[ai.Block]())}}}, true
	case scopeType: // storage.Scope.MarshalJSON: a one-member object
		return S{"type": "object", "minProperties": 1, "maxProperties": 1,
			"properties":           S{"session": S{"type": "boolean"}, "conversation": S{"type": "integer"}, "scratch": S{"type": "integer"}},
			"additionalProperties": false}, true
	case draftType: // AcceptedEntryDraft.MarshalJSON: head is "self" or an id
		return g.ref(t, func() S {
			return g.object(t, S{"head": S{"anyOf": []any{S{"const": "self"}, S{"type": "integer"}}}})
		}), true
	case opType: // delta.Op.MarshalJSON: a tuple [verb, …]
		return g.ref(t, func() S {
			return S{"type": "array", "minItems": 2, "maxItems": 5,
				"prefixItems": []any{S{"enum": []any{"r", "s", "d", "a", "t", "p", "m"}}}}
		}), true
	case eventType: // ConversationEvent.MarshalJSON: the fields of its type
		return g.ref(t, func() S { return g.event() }), true
	}
	return nil, false
}

// event is a conversation event's shape, as ConversationEvent.MarshalJSON
// writes it: type and readAt, then the members of its type.
func (g *generator) event() S {
	task := g.schema(reflect.TypeFor[*storage.Task]())
	return S{"type": "object", "required": []any{"type"}, "additionalProperties": false,
		"properties": S{
			"type": S{"enum": []any{core.EventEntry, core.EventTaskStart, core.EventTaskUpdate, core.EventTaskEnd,
				core.EventTaskOutput, core.EventValue, core.EventInbox, core.EventContext, core.EventFault, core.EventClosed}},
			"readAt": S{"type": "integer"},
			"entry":  g.schema(reflect.TypeFor[*storage.Entry]()),
			// task: the task record, or a task_output's task id
			"task":     S{"anyOf": []any{task, S{"type": "integer"}}},
			"previous": task,
			// ops: a task_output's delta ops, or an inbox event's inbox ops
			"ops": S{"anyOf": []any{
				g.schema(reflect.TypeFor[[]delta.Op]()),
				g.schema(reflect.TypeFor[[]core.InboxOp]()),
			}},
			"addr":  S{"type": "string"},
			"value": S{},
			"ids":   g.schema(reflect.TypeFor[[]storage.ID]()),
			"error": S{"type": "string"},
		}}
}
