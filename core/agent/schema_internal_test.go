package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pico-go/pico/core/ai"
)

// A tool whose parameters are not a schema is refused each time a session
// registers it, naming the tool: the process-wide cache keeps only schemas
// that compiled, and the same name with a good schema compiles.
func TestABadSchemaIsRefusedEveryTime(t *testing.T) {
	run := func(context.Context, string, json.RawMessage, *ToolOutput, *ToolRuntime) error { return nil }
	tool := func(params string) Tool {
		return Tool{Definition: ai.Tool{Name: "schema-test", Parameters: json.RawMessage(params)}, Execute: run}
	}
	for i := range 2 {
		_, err := newToolRegistry([]Tool{tool(`{"type":5}`)})
		if err == nil || !strings.Contains(err.Error(), `"schema-test"`) {
			t.Fatalf("registration %d of a tool whose parameters are not a schema: %v; want an error naming it", i+1, err)
		}
	}
	r, err := newToolRegistry([]Tool{tool(`{"type":"object","properties":{"n":{"type":"integer"}}}`)})
	if err != nil || r.schemas["schema-test"] == nil {
		t.Fatalf("the same name with a good schema: %v", err)
	}
}

// A call with no arguments at all (a provider's for a tool without
// parameters) is validated as the empty object: valid where the schema
// requires nothing, refused naming the root where it requires a member.
func TestEmptyArgumentsAreTheEmptyObject(t *testing.T) {
	open, err := compileSchema("open-test", json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	needs, err := compileSchema("needs-test", json.RawMessage(`{"type":"object","required":["n"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{"", "  \n"} {
		if err := open.validate(json.RawMessage(args)); err != nil {
			t.Errorf("arguments %q where nothing is required: %v", args, err)
		}
		if err := needs.validate(json.RawMessage(args)); err == nil || strings.Contains(err.Error(), "not JSON") {
			t.Errorf("arguments %q where n is required: %v; want the missing member named", args, err)
		}
	}
}
