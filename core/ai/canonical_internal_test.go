package ai

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pico-go/pico/internal/jsonvalue"
	"pgregory.net/rapid"
)

// deepCopy copies what Canonical might change of m.
func deepCopy(m Message) Message {
	c := m
	c.Content.Blocks = slices.Clone(m.Content.Blocks)
	for i := range c.Content.Blocks {
		c.Content.Blocks[i].Arguments = bytes.Clone(c.Content.Blocks[i].Arguments)
	}
	c.Details, c.Diagnostics = bytes.Clone(m.Details), bytes.Clone(m.Diagnostics)
	if m.Deferred != nil {
		d := *m.Deferred
		d.Data = bytes.Clone(d.Data)
		c.Deferred = &d
	}
	if m.NestedCalls != nil {
		n := *m.NestedCalls
		n.Calls = slices.Clone(n.Calls)
		for i := range n.Calls {
			n.Calls[i].Arguments = bytes.Clone(n.Calls[i].Arguments)
		}
		c.NestedCalls = &n
	}
	c.ToolsAdded = slices.Clone(m.ToolsAdded)
	for i := range c.ToolsAdded {
		c.ToolsAdded[i].Parameters = bytes.Clone(c.ToolsAdded[i].Parameters)
		c.ToolsAdded[i].ConstrainedSampling = bytes.Clone(c.ToolsAdded[i].ConstrainedSampling)
	}
	return c
}

// raws are m's raw values, named.
func raws(m Message) map[string]json.RawMessage {
	out := map[string]json.RawMessage{"details": m.Details, "diagnostics": m.Diagnostics}
	for i, b := range m.Content.Blocks {
		out["block "+string(rune('0'+i))] = b.Arguments
	}
	if m.Deferred != nil {
		out["deferred"] = m.Deferred.Data
	}
	if m.NestedCalls != nil {
		for i, c := range m.NestedCalls.Calls {
			out["nested "+string(rune('0'+i))] = c.Arguments
		}
	}
	for i, t := range m.ToolsAdded {
		out["parameters "+string(rune('0'+i))], out["sampling "+string(rune('0'+i))] = t.Parameters, t.ConstrainedSampling
	}
	return out
}

// Canonical leaves m alone and gives the message a store reads back: every
// raw value as json.Marshal writes it, the same bytes when the whole is
// marshalled; or, exactly when a raw value is not JSON or the message
// would not decode, an error.
func TestCanonicalIsWhatAStoreReadsBack(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMessage(t)
		if rapid.Bool().Draw(t, "anyBlocks") {
			m.Content = Blocks(rapid.SliceOfN(rapid.Custom(genAnyBlock), 0, 3).Draw(t, "blocks")...)
		}
		if rapid.Bool().Draw(t, "oddRaws") {
			m.Details, m.Diagnostics = genArguments(t), genArguments(t)
			m.Deferred = &Deferred{Provider: "p", ID: "d", Data: genArguments(t)}
			m.NestedCalls = &NestedCalls{Calls: []NestedCall{{ID: "a", Arguments: genArguments(t)}, {ID: "b", Arguments: genArguments(t)}}}
			m.ToolsAdded = []Tool{genTool(t), genTool(t)}
		}
		before := deepCopy(m)
		got, err := m.Canonical()
		if !reflect.DeepEqual(m, before) {
			t.Fatalf("Canonical changed its message:\n%#v\nwas\n%#v", m, before)
		}
		wantErr := m.check() != nil
		for _, b := range m.Content.Blocks {
			wantErr = wantErr || b.check() != nil
		}
		for _, raw := range raws(m) {
			wantErr = wantErr || len(raw) > 0 && !json.Valid(raw)
		}
		if (err != nil) != wantErr {
			t.Fatalf("Canonical(%#v) = %v; want an error: %t", m, err, wantErr)
		}
		if err != nil {
			return
		}
		for name, raw := range raws(got) {
			if len(raw) > 0 && !jsonvalue.Verbatim(raw) {
				t.Fatalf("Canonical left %s as %s, which json.Marshal rewrites", name, raw)
			}
		}
		want, wantMarshalErr := json.Marshal(m)
		out, marshalErr := json.Marshal(got)
		if (marshalErr != nil) != (wantMarshalErr != nil) || !bytes.Equal(out, want) {
			t.Fatalf("the canonical message writes %s, %v; the message %s, %v", out, marshalErr, want, wantMarshalErr)
		}
		if again, err := got.Canonical(); err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("Canonical of a canonical message = %#v, %v; want it unchanged", again, err)
		}
	})
}

// A canonical message comes back sharing everything, without allocating.
func TestCanonicalSharesACanonicalMessage(t *testing.T) {
	m := Message{Role: RoleAssistant, Content: Blocks(Text("hi"), ToolCall("c1", "f", json.RawMessage(`{"a":1}`))),
		NestedCalls: &NestedCalls{Calls: []NestedCall{{ID: "n", Arguments: json.RawMessage(`[1]`)}}}}
	got, err := m.Canonical()
	if err != nil || &got.Content.Blocks[0] != &m.Content.Blocks[0] || got.NestedCalls != m.NestedCalls {
		t.Fatalf("Canonical copied a canonical message (err %v)", err)
	}
	if n := testing.AllocsPerRun(10, func() { _, _ = m.Canonical() }); n != 0 {
		t.Fatalf("Canonical of a canonical message allocates %v times", n)
	}
}

// An error names what is wrong: the raw value and where it is, or the
// rule the message breaks.
func TestCanonicalNamesWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		m    Message
		want string
	}{
		{Message{Role: RoleAssistant, Content: Blocks(Text("x"), ToolCall("c1", "f", json.RawMessage(`{"a":`)))}, `block 1's arguments is not JSON: {"a":`},
		{Message{Role: RoleToolResult, ToolCallID: "c", Details: json.RawMessage(`nope`)}, "details is not JSON"},
		{Message{Role: "robot"}, `unknown message role "robot"`},
		{Message{Role: RoleAssistant, Content: Blocks(Block{Type: BlockToolCall, Name: "f"})}, "toolCall block without id (block 0)"},
		{Message{Role: RoleSystem, ToolsAdded: []Tool{{Name: "t", Parameters: json.RawMessage(`{`)}}}, `added tool "t"'s parameters is not JSON`},
	} {
		if _, err := tc.m.Canonical(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Canonical(%+v) = %v; want an error saying %q", tc.m, err, tc.want)
		}
	}
}
