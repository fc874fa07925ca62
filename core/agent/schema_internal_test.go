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
