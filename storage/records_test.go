package storage_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

var update = flag.Bool("update", false, "rewrite fixtures/entries from the Go values in TestEntryFixtures")

// entryFixturesDir holds the golden entries that ports replay. The Go values
// below are their source of truth; -update rewrites the files from them.
var entryFixturesDir = filepath.Join("..", "fixtures", "entries")

const updateEntryFixtures = "go test ./storage -run TestEntryFixtures -update"

// facets names which optional parts of an entry are present. Fixture names
// say the same thing; the table keeps the two honest.
type facets struct {
	data, model, head, edits, key, byTask bool
	headSelf                              bool // head is the entry's own id (reset, handoff)
}

func facetsOf(e *storage.Entry) facets {
	return facets{
		data:     len(e.Data) > 0,
		model:    len(e.Model) > 0,
		head:     e.Head != 0,
		edits:    len(e.Edits) > 0,
		key:      e.Key != "",
		byTask:   e.ByTaskID != 0,
		headSelf: e.Head != 0 && e.Head == e.ID,
	}
}

type entryFixture struct {
	name   string // file name without ".json"
	facets facets
	entry  storage.Entry
}

// Timestamps are fixed so the files never change unless the values do.
const ts0 int64 = 1767225600000 // 2026-01-01T00:00:00Z

func rawJSON(s string) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic("rawJSON: invalid JSON literal in test: " + err.Error())
	}
	return b.Bytes()
}

func text(s string) *string { return &s }

var (
	readTool = ai.Tool{
		Name:        "read",
		Description: "Read a file from the workspace.",
		Parameters:  rawJSON(`{"type":"object","properties":{"path":{"type":"string","description":"Path relative to the workspace root."},"offset":{"type":"integer","minimum":0}},"required":["path"],"additionalProperties":false}`),
	}
	bashTool = ai.Tool{
		Name:        "bash",
		Description: "Run a shell command.",
		Parameters:  rawJSON(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`),
	}
	writeTool = ai.Tool{
		Name:        "write",
		Description: "Write a file in the workspace.",
		Parameters:  rawJSON(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`),
	}
)

// entryFixtures are the golden entries, one file each. Data payloads are
// written as JSON literals in the shapes of core's built-in kinds (storage
// knows no kind types); raw JSON keeps its member order in the files.
var entryFixtures = []entryFixture{
	{
		name:   "plugin_no_facets",
		facets: facets{},
		entry:  storage.Entry{ID: 12, ConversationID: 1, Kind: "checkpoint"},
	},
	{
		name:   "reset_head",
		facets: facets{head: true, headSelf: true},
		entry:  storage.Entry{ID: 40, ConversationID: 1, Kind: "reset", Head: 40},
	},
	{
		name:   "plan_note_data",
		facets: facets{data: true},
		entry: storage.Entry{ID: 14, ConversationID: 1, Kind: "plan_note",
			Data: rawJSON(`{"step":2,"text":"Write the parser first.","done":false,"tags":["parser","v1"]}`)},
	},
	{
		name:   "user_model_string",
		facets: facets{model: true},
		entry: storage.Entry{ID: 10, ConversationID: 1, Kind: "user",
			Model: []ai.Message{ai.UserText("Summarize README.md in two sentences.", ts0)}},
	},
	{
		name:   "user_model_text_and_image",
		facets: facets{model: true},
		entry: storage.Entry{ID: 11, ConversationID: 1, Kind: "user",
			Model: []ai.Message{{
				Role: ai.RoleUser,
				Content: ai.Blocks(
					ai.Text("What does this diagram show?"),
					ai.Block{Type: ai.BlockImage, Data: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==", MimeType: "image/png"},
				),
				Timestamp: ts0 + 1000,
			}}},
	},
	{
		name:   "prune_edits",
		facets: facets{edits: true},
		entry: storage.Entry{ID: 45, ConversationID: 1, Kind: "prune",
			Edits: []storage.ContextEdit{
				{Target: 21, Action: storage.EditOmit},
				{Target: 23, Action: storage.EditReplace, Messages: []ai.Message{{
					Role:       ai.RoleToolResult,
					Content:    ai.Blocks(ai.Text("[output shortened: 4,812 lines]")),
					ToolCallID: "call_bash_2",
					ToolName:   "bash",
					IsError:    ai.Bool(false),
					Timestamp:  ts0 + 23000,
				}}},
			}},
	},
	{
		name:   "tool_result_key_model",
		facets: facets{key: true, model: true},
		entry: storage.Entry{ID: 22, ConversationID: 1, Kind: "tool_result", Key: "call_read_1",
			Model: []ai.Message{{
				Role:       ai.RoleToolResult,
				Content:    ai.Blocks(ai.Text("# pico\n\nA durable agent harness.\n")),
				ToolCallID: "call_read_1",
				ToolName:   "read",
				Details:    rawJSON(`{"path":"README.md","lines":3,"truncated":false}`),
				IsError:    ai.Bool(false),
				Timestamp:  ts0 + 22000,
				DurationMs: 4,
			}}},
	},
	{
		name:   "tool_result_error_data_key_model_by_task",
		facets: facets{data: true, key: true, model: true, byTask: true},
		entry: storage.Entry{ID: 25, ConversationID: 1, Kind: "tool_result", ByTaskID: 24, Key: "call_bash_3",
			Data: rawJSON(`{"exitCode":2,"stderrLines":1}`),
			Model: []ai.Message{{
				Role:       ai.RoleToolResult,
				Content:    ai.Blocks(ai.Text("ls: cannot access 'missing': No such file or directory")),
				ToolCallID: "call_bash_3",
				ToolName:   "bash",
				NestedCalls: &ai.NestedCalls{
					Calls: []ai.NestedCall{
						{ID: "n1", Name: "spawn", Arguments: rawJSON(`{"argv":["ls","missing"]}`), ArgumentsBytes: 24, Status: "error", DurationMs: 3, Error: "exit status 2"},
					},
					Complete: true,
				},
				IsError:    ai.Bool(true),
				Timestamp:  ts0 + 25000,
				DurationMs: 9,
			}}},
	},
	{
		name:   "summary_data_model_head",
		facets: facets{data: true, model: true, head: true},
		entry: storage.Entry{ID: 50, ConversationID: 1, Kind: "summary",
			Data: rawJSON(`{"summarizedThrough":29}`),
			Model: []ai.Message{ai.UserText(
				"Summary of the conversation so far: the user asked for a README summary; it was read and summarized.",
				ts0+50000)},
			Head: 30},
	},
	{
		name:   "handoff_data_model_head",
		facets: facets{data: true, model: true, head: true, headSelf: true},
		entry: storage.Entry{ID: 60, ConversationID: 1, Kind: "handoff",
			Data:  rawJSON(`{"text":"Continue with the parser; the README is done."}`),
			Model: []ai.Message{ai.UserText("Continue with the parser; the README is done.", ts0+60000)},
			Head:  60},
	},
	{
		name:   "system_baseline_data_model",
		facets: facets{data: true, model: true},
		entry: storage.Entry{ID: 2, ConversationID: 1, Kind: "system",
			Data: rawJSON(`{"baseline":true,"sections":[` +
				`{"key":"identity","text":"You are pico, a coding agent."},` +
				`{"key":"env","text":"cwd: /work"}],` +
				`"toolsAdded":[` + mustJSON(readTool) + `,` + mustJSON(bashTool) + `]}`),
			Model: []ai.Message{{
				Role:    ai.RoleSystem,
				Content: ai.PlainText(""),
				Sections: map[string]*string{
					"identity": text("You are pico, a coding agent."),
					"env":      text("cwd: /work"),
				},
				ToolsAdded: []ai.Tool{readTool, bashTool},
				Timestamp:  ts0 - 1000,
			}}},
	},
	{
		name:   "system_delta_data_model",
		facets: facets{data: true, model: true},
		entry: storage.Entry{ID: 33, ConversationID: 1, Kind: "system",
			Data: rawJSON(`{"sections":[` +
				`{"key":"env","text":"cwd: /work/parser"},` +
				`{"key":"plan_mode","text":null}],` +
				`"toolsAdded":[` + mustJSON(writeTool) + `],` +
				`"toolsRemoved":[` + mustJSON(bashTool) + `]}`),
			Model: []ai.Message{{
				Role:    ai.RoleSystem,
				Content: ai.PlainText(""),
				Sections: map[string]*string{
					"env":       text("cwd: /work/parser"),
					"plan_mode": nil,
				},
				ToolsAdded:   []ai.Tool{writeTool},
				ToolsRemoved: []ai.ToolRef{{Name: "bash"}},
				Timestamp:    ts0 + 33000,
			}}},
	},
	{
		name:   "assistant_model_tool_use",
		facets: facets{model: true},
		entry: storage.Entry{ID: 20, ConversationID: 1, Kind: "assistant",
			Model: []ai.Message{{
				Role: ai.RoleAssistant,
				Content: ai.Blocks(
					ai.Block{Type: ai.BlockThinking, Thinking: "The user wants a summary; read the file first.", ThinkingSignature: "EqQBCkYIBxgCKkD0c2lnbmF0dXJl"},
					ai.Text("Let me read it."),
					ai.ToolCall("call_read_1", "read", rawJSON(`{"path":"README.md"}`)),
				),
				API:      "anthropic-messages",
				Provider: "anthropic",
				Model:    "claude-sonnet-4-5",
				Usage: &ai.Usage{
					Input: 1200, Output: 350, CacheRead: 800, CacheWrite: 0, Reasoning: 120, TotalTokens: 2350,
					Cost: ai.Cost{Input: 0.0036, Output: 0.00525, CacheRead: 0.00024, CacheWrite: 0, Total: 0.00909},
				},
				StopReason: ai.StopToolUse,
				ResponseID: "msg_01",
				Timestamp:  ts0 + 20000,
				DurationMs: 1830,
			}}},
	},
	{
		name:   "assistant_model_error",
		facets: facets{model: true},
		entry: storage.Entry{ID: 27, ConversationID: 1, Kind: "assistant",
			Model: []ai.Message{{
				Role:         ai.RoleAssistant,
				Content:      ai.Blocks(),
				API:          "anthropic-messages",
				Provider:     "anthropic",
				Model:        "claude-sonnet-4-5",
				Usage:        &ai.Usage{},
				StopReason:   ai.StopError,
				ErrorMessage: "529 overloaded_error: Overloaded",
				Timestamp:    ts0 + 27000,
			}}},
	},
	{
		name:   "notice_data_model",
		facets: facets{data: true, model: true},
		entry: storage.Entry{ID: 34, ConversationID: 1, Kind: "notice",
			Data: rawJSON(`{"level":"warning","code":"context_high","percent":91}`),
			Model: []ai.Message{{
				Role:      ai.RoleSystem,
				Content:   ai.PlainText("Note: the context window is 91% full."),
				Timestamp: ts0 + 34000,
			}}},
	},
	{
		name:   "assistant_model_by_task",
		facets: facets{model: true, byTask: true},
		entry: storage.Entry{ID: 32, ConversationID: 1, Kind: "assistant", ByTaskID: 31,
			Model: []ai.Message{{
				Role:     ai.RoleAssistant,
				Content:  ai.Blocks(ai.Text("README.md describes pico, a durable agent harness.")),
				API:      "anthropic-messages",
				Provider: "anthropic",
				Model:    "claude-sonnet-4-5",
				Usage: &ai.Usage{
					Input: 1400, Output: 40, CacheRead: 1100, CacheWrite: 300, CacheWrite1h: 300, TotalTokens: 2840,
					Cost: ai.Cost{Input: 0.0042, Output: 0.0006, CacheRead: 0.00033, CacheWrite: 0.0018, Total: 0.00693},
				},
				StopReason: ai.StopStop,
				Timestamp:  ts0 + 32000,
				DurationMs: 640,
			}}},
	},
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("mustJSON: " + err.Error())
	}
	return string(b)
}

// encodeEntryFixture is the one fixture encoding: two-space indent and a
// trailing newline.
func encodeEntryFixture(e *storage.Entry) ([]byte, error) {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// decodeEntryStrict decodes exactly one entry and rejects unknown fields and
// trailing data.
func decodeEntryStrict(b []byte) (*storage.Entry, error) {
	var e storage.Entry
	if err := decodeStrict(b, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// The golden entry files are exactly the encoding of the Go values above,
// decode strictly, re-encode to the same bytes, and carry the facets their
// names promise.
func TestEntryFixtures(t *testing.T) {
	if *update {
		writeEntryFixtures(t)
	}
	files, err := filepath.Glob(filepath.Join(entryFixturesDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk, inTable []string
	for _, f := range files {
		onDisk = append(onDisk, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	for _, fx := range entryFixtures {
		inTable = append(inTable, fx.name)
	}
	slices.Sort(onDisk)
	slices.Sort(inTable)
	if diff := cmp.Diff(inTable, onDisk); diff != "" {
		t.Errorf("fixture files (-table +disk):\n%s\nto regenerate: %s", diff, updateEntryFixtures)
	}

	for _, fx := range entryFixtures {
		t.Run(fx.name, func(t *testing.T) {
			if got := facetsOf(&fx.entry); got != fx.facets {
				t.Errorf("Go value facets: got %+v; want %+v", got, fx.facets)
			}
			want, err := encodeEntryFixture(&fx.entry)
			if err != nil {
				t.Fatalf("encode Go value: %v", err)
			}
			path := filepath.Join(entryFixturesDir, fx.name+".json")
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v\nto regenerate: %s", err, updateEntryFixtures)
			}
			if !bytes.Equal(file, want) {
				t.Errorf("%s differs from its Go value (-file +value):\n%s\nto regenerate: %s",
					path, cmp.Diff(string(file), string(want)), updateEntryFixtures)
			}

			e, err := decodeEntryStrict(file)
			if err != nil {
				t.Fatalf("decode %s: %v", path, err)
			}
			again, err := encodeEntryFixture(e)
			if err != nil {
				t.Fatalf("re-encode %s: %v", path, err)
			}
			if !bytes.Equal(again, file) {
				t.Errorf("%s does not round-trip (-file +re-encoded):\n%s", path, cmp.Diff(string(file), string(again)))
			}
			if got := facetsOf(e); got != fx.facets {
				t.Errorf("%s facets: got %+v; want %+v", path, got, fx.facets)
			}
			// Go escapes <, > and & inside strings; JSON.stringify and most
			// other encoders do not. Keeping them out of the fixtures keeps
			// the bytes reproducible in any language.
			for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
				if bytes.Contains(file, []byte(esc)) {
					t.Errorf("%s contains %s: fixtures must avoid characters Go escapes", path, esc)
				}
			}
		})
	}
}

func writeEntryFixtures(t *testing.T) {
	t.Helper()
	if err := os.MkdirAll(entryFixturesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	keep := map[string]bool{}
	for _, fx := range entryFixtures {
		file := fx.name + ".json"
		if keep[file] {
			t.Fatalf("duplicate fixture name %q", fx.name)
		}
		keep[file] = true
		b, err := encodeEntryFixture(&fx.entry)
		if err != nil {
			t.Fatalf("%s: %v", fx.name, err)
		}
		if err := os.WriteFile(filepath.Join(entryFixturesDir, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stale, err := filepath.Glob(filepath.Join(entryFixturesDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range stale {
		if !keep[filepath.Base(f)] {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Scopes have a one-member object form that round-trips.
func TestScopeJSONRoundTrip(t *testing.T) {
	tests := []struct {
		scope storage.Scope
		json  string
	}{
		{storage.SessionScope(), `{"session":true}`},
		{storage.ConversationScope(7), `{"conversation":7}`},
		{storage.ScratchScope(12), `{"scratch":12}`},
	}
	for _, tt := range tests {
		t.Run(tt.scope.String(), func(t *testing.T) {
			got, err := json.Marshal(tt.scope)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if string(got) != tt.json {
				t.Errorf("encode: got %s; want %s", got, tt.json)
			}
			var s storage.Scope
			if err := json.Unmarshal([]byte(tt.json), &s); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if s != tt.scope {
				t.Errorf("decode: got %+v; want %+v", s, tt.scope)
			}
		})
	}
}

// A malformed scope is rejected with an error that names the problem, both
// alone and inside an address.
func TestScopeJSONRejectsMalformed(t *testing.T) {
	tests := []struct {
		name string
		json string
		want []string
	}{
		{"two members", `{"session":true,"conversation":7}`, []string{"exactly one member"}},
		{"no members", `{}`, []string{"exactly one member"}},
		{"null", `null`, []string{"exactly one member"}},
		{"unknown member", `{"task":3}`, []string{"unknown member", `"task"`}},
		{"session false", `{"session":false}`, []string{"session must be true", "false"}},
		{"session not a bool", `{"session":1}`, []string{"session must be true", "1"}},
		{"conversation zero", `{"conversation":0}`, []string{"conversation must be a positive id", "0"}},
		{"conversation negative", `{"conversation":-3}`, []string{"conversation must be a positive id", "-3"}},
		{"conversation string", `{"conversation":"x"}`, []string{"conversation must be a positive id", `"x"`}},
		{"scratch fraction", `{"scratch":1.5}`, []string{"scratch must be a positive id", "1.5"}},
		{"not an object", `[7]`, []string{"storage: scope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s storage.Scope
			err := json.Unmarshal([]byte(tt.json), &s)
			checkErrorNames(t, "scope "+tt.json, err, tt.want)

			var a storage.Address
			err = json.Unmarshal([]byte(`{"scope":`+tt.json+`,"namespace":"n"}`), &a)
			checkErrorNames(t, "address with scope "+tt.json, err, tt.want)
		})
	}
}

func checkErrorNames(t *testing.T, what string, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got no error; want one naming %q", what, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: got error %q; want it to contain %q", what, err, w)
		}
	}
}

// Address.String is a map key on the wire and in views, so distinct
// addresses must give distinct strings however their parts are spelled.
func TestAddressStringIsDistinct(t *testing.T) {
	scopes := []storage.Scope{
		storage.SessionScope(),
		storage.ConversationScope(7), storage.ConversationScope(17), storage.ConversationScope(71),
		storage.ScratchScope(7), storage.ScratchScope(12),
	}
	names := []string{"a", "b", "a/b", "b/a", "/", "//", `"`, `a"b`, `a"/"b`, `a/"b"`, "rewind", "/rewind", `\`, `\"`, "a b", "ü"}
	seen := map[string]storage.Address{}
	for _, s := range scopes {
		for _, ns := range names {
			for _, key := range append([]string{""}, names...) {
				for _, rewind := range []bool{false, true} {
					a := storage.Address{Scope: s, Namespace: ns, Key: key, Rewind: rewind}
					str := a.String()
					if prev, dup := seen[str]; dup {
						t.Fatalf("String() collision: %+v and %+v both give %s", prev, a, str)
					}
					seen[str] = a
					plain := a
					plain.Rewind = false
					if got, want := a.StateKey(), plain.String(); got != want {
						t.Errorf("StateKey of %+v: got %s; want %s", a, got, want)
					}
				}
			}
		}
	}

	golden := []struct {
		addr storage.Address
		want string
	}{
		{storage.Address{Scope: storage.SessionScope(), Namespace: "pi.model"}, `session/"pi.model"`},
		{storage.Address{Scope: storage.ConversationScope(7), Namespace: "plan", Key: "k", Rewind: true}, `conversation:7/"plan"/"k"/rewind`},
		{storage.Address{Scope: storage.ScratchScope(12), Namespace: "a/b", Key: `"`}, `scratch:12/"a/b"/"\""`},
	}
	for _, g := range golden {
		if got := g.addr.String(); got != g.want {
			t.Errorf("String of %+v: got %s; want %s", g.addr, got, g.want)
		}
	}
}

// Validate accepts well-formed addresses and names what is wrong with the
// others.
func TestAddressValidate(t *testing.T) {
	tests := []struct {
		name     string
		addr     storage.Address
		want     string // substring of the error; "" for valid
		typedErr bool   // the error is an *AddressError
	}{
		{"session value", storage.SessionValue[string]("pi.model").Address, "", false},
		{"session list with key", storage.SessionList[int]("pi.inbox").WithKey("k").Address, "", false},
		{"rewindable conversation value", storage.ConversationValue[bool]("plan", storage.Rewind).In(7).Address, "", false},
		{"sticky conversation list", storage.ConversationList[int]("queue", storage.Sticky).In(7).Address, "", false},
		{"scratch value", storage.ScratchValue[int]("progress").In(12).Address, "", false},

		{"unbound conversation", storage.ConversationValue[bool]("plan", storage.Rewind).Address, "conversation scope is not bound", true},
		{"unbound scratch", storage.ScratchList[int]("notes").Address, "scratch scope is not bound", true},
		{"negative conversation id", storage.Address{Scope: storage.ConversationScope(-1), Namespace: "n"}, "conversation scope is not bound", true},
		{"empty namespace", storage.Address{Scope: storage.SessionScope()}, "empty namespace", true},
		{"empty namespace in conversation", storage.Address{Scope: storage.ConversationScope(7), Key: "k"}, "empty namespace", true},
		{"rewindable session", storage.Address{Scope: storage.SessionScope(), Namespace: "n", Rewind: true}, "only conversation state can be rewindable", true},
		{"rewindable scratch", storage.Address{Scope: storage.ScratchScope(12), Namespace: "n", Rewind: true}, "only conversation state can be rewindable", true},
		{"zero scope", storage.Address{Namespace: "n"}, "unknown scope", true},
		// Validate reports this one with a plain error, not *AddressError.
		{"session scope with an id", storage.Address{Scope: storage.Scope{Kind: storage.ScopeSession, ID: 3}, Namespace: "n"}, "session scope carries no id", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.addr.Validate()
			if tt.want == "" {
				if err != nil {
					t.Errorf("Validate(%s): got %v; want nil", tt.addr, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%s): got nil; want error containing %q", tt.addr, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate(%s): got %q; want it to contain %q", tt.addr, err, tt.want)
			}
			var ae *storage.AddressError
			if tt.typedErr && !errors.As(err, &ae) {
				t.Errorf("Validate(%s): got %T; want *storage.AddressError", tt.addr, err)
			}
		})
	}
}

// allWriteTypes lists every write type of the reference (§7.3); the round
// trip below must cover each.
var allWriteTypes = []storage.WriteType{
	storage.WriteValueSet, storage.WriteValueDelete,
	storage.WriteListAppend, storage.WriteListRemove, storage.WriteListClear,
	storage.WriteCreateConversation, storage.WriteDeleteConversation,
	storage.WriteEntry, storage.WriteTask, storage.WritePatch, storage.WriteSettle,
}

var (
	modelAddr  = storage.Address{Scope: storage.SessionScope(), Namespace: "pi.model"}
	planAddr   = storage.Address{Scope: storage.ConversationScope(7), Namespace: "plan", Key: "mode", Rewind: true}
	inboxAddr  = storage.Address{Scope: storage.ConversationScope(7), Namespace: "pi.inbox"}
	notesAddr  = storage.Address{Scope: storage.ScratchScope(12), Namespace: "notes"}
	writeCases = []struct {
		write storage.Write
		json  string
	}{
		{storage.Write{Type: storage.WriteValueSet, Addr: &modelAddr, Value: rawJSON(`"claude-sonnet-4-5"`)},
			`{"type":"value.set","addr":{"scope":{"session":true},"namespace":"pi.model"},"value":"claude-sonnet-4-5"}`},
		{storage.Write{Type: storage.WriteValueDelete, Addr: &planAddr},
			`{"type":"value.delete","addr":{"scope":{"conversation":7},"namespace":"plan","key":"mode","rewind":true}}`},
		{storage.Write{Type: storage.WriteListAppend, Addr: &inboxAddr, Value: rawJSON(`{"text":"also check tests","mode":"steer"}`)},
			`{"type":"list.append","addr":{"scope":{"conversation":7},"namespace":"pi.inbox"},"value":{"text":"also check tests","mode":"steer"}}`},
		{storage.Write{Type: storage.WriteListRemove, Addr: &inboxAddr, Element: 104},
			`{"type":"list.remove","addr":{"scope":{"conversation":7},"namespace":"pi.inbox"},"element":104}`},
		{storage.Write{Type: storage.WriteListClear, Addr: &notesAddr},
			`{"type":"list.clear","addr":{"scope":{"scratch":12},"namespace":"notes"}}`},
		{storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 105, Parent: &storage.ParentRef{ConversationID: 7, At: 101}, Owner: 12}},
			`{"type":"createConversation","conversation":{"id":105,"parent":{"conversationId":7,"at":101},"owner":12}}`},
		{storage.Write{Type: storage.WriteDeleteConversation, ID: 9},
			`{"type":"deleteConversation","id":9}`},
		{storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{
			ID: 106, ConversationID: 7, Kind: "tool_result", ByTaskID: 12, Key: "call_1",
			Data: rawJSON(`{"lines":3}`),
			Model: []ai.Message{{Role: ai.RoleToolResult, Content: ai.Blocks(ai.Text("ok")), ToolCallID: "call_1", ToolName: "read",
				IsError: ai.Bool(false), Timestamp: ts0}},
		}},
			`{"type":"entry","entry":{"id":106,"conversationId":7,"kind":"tool_result","byTaskId":12,"key":"call_1","data":{"lines":3},"model":[{"role":"toolResult","content":[{"type":"text","text":"ok"}],"toolCallId":"call_1","toolName":"read","isError":false,"timestamp":1767225600000}]}}`},
		{storage.Write{Type: storage.WriteTask, Task: &storage.Task{
			ID: 107, ConversationID: 7, Kind: "generation", Status: "pending", Role: storage.RoleStart,
			State: rawJSON(`{"input":106}`), After: []storage.ID{12}, Background: true, Owns: []storage.ID{105},
		}},
			`{"type":"task","task":{"id":107,"conversationId":7,"kind":"generation","status":"pending","role":"start","state":{"input":106},"after":[12],"background":true,"owns":[105]}}`},
		{storage.Write{Type: storage.WritePatch, ID: 107, Status: "streaming", Role: storage.RoleInflight, State: rawJSON(`{"input":106,"attempt":1}`), Abort: true, Owns: []storage.ID{105, 108}},
			`{"type":"patch","id":107,"status":"streaming","role":"inflight","state":{"input":106,"attempt":1},"abort":true,"owns":[105,108]}`},
		{storage.Write{Type: storage.WriteSettle, ID: 107, Status: "done", Role: storage.RoleTerminal, State: rawJSON(`{"result":109}`)},
			`{"type":"settle","id":107,"status":"done","role":"terminal","state":{"result":109}}`},
	}
)

// Each write type has one JSON form, which decodes strictly back to the same
// write and the same bytes.
func TestWriteJSONRoundTrip(t *testing.T) {
	covered := map[storage.WriteType]bool{}
	for _, tc := range writeCases {
		covered[tc.write.Type] = true
		t.Run(string(tc.write.Type), func(t *testing.T) {
			got, err := json.Marshal(tc.write)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if string(got) != tc.json {
				t.Errorf("encode:\ngot  %s\nwant %s", got, tc.json)
			}
			var w storage.Write
			if err := decodeStrict([]byte(tc.json), &w); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if diff := cmp.Diff(tc.write, w); diff != "" {
				t.Errorf("decode (-want +got):\n%s", diff)
			}
			again, err := json.Marshal(w)
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			if string(again) != tc.json {
				t.Errorf("re-encode:\ngot  %s\nwant %s", again, tc.json)
			}
		})
	}
	for _, wt := range allWriteTypes {
		if !covered[wt] {
			t.Errorf("write type %q has no round-trip case", wt)
		}
		wantState := strings.HasPrefix(string(wt), "value.") || strings.HasPrefix(string(wt), "list.")
		if got := wt.IsState(); got != wantState {
			t.Errorf("%q.IsState(): got %v; want %v", wt, got, wantState)
		}
	}
}

// A commit batch, main or scratch, round-trips with its writes in order.
func TestCommitBatchJSONRoundTrip(t *testing.T) {
	mainBatch := storage.CommitBatch{Kind: storage.BatchMain}
	var mainJSON []string
	for _, tc := range writeCases {
		if tc.write.Addr != nil && tc.write.Addr.Scope.Kind == storage.ScopeScratch {
			continue // a main batch never writes scratch
		}
		mainBatch.Writes = append(mainBatch.Writes, tc.write)
		mainJSON = append(mainJSON, tc.json)
	}
	scratchSet := storage.Write{Type: storage.WriteValueSet, Addr: &notesAddr, Value: rawJSON(`[1,2]`)}
	tests := []struct {
		name  string
		batch storage.CommitBatch
		json  string
	}{
		{"main", mainBatch, `{"kind":"main","writes":[` + strings.Join(mainJSON, ",") + `]}`},
		{"scratch", storage.CommitBatch{Kind: storage.BatchScratch, Task: 12, Writes: []storage.Write{scratchSet, writeCases[4].write}},
			`{"kind":"scratch","task":12,"writes":[{"type":"value.set","addr":{"scope":{"scratch":12},"namespace":"notes"},"value":[1,2]},` + writeCases[4].json + `]}`},
		{"empty", storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{}}, `{"kind":"main","writes":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.batch)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if string(got) != tt.json {
				t.Errorf("encode:\ngot  %s\nwant %s", got, tt.json)
			}
			var b storage.CommitBatch
			if err := decodeStrict([]byte(tt.json), &b); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if diff := cmp.Diff(tt.batch, b); diff != "" {
				t.Errorf("decode (-want +got):\n%s", diff)
			}
			again, err := json.Marshal(b)
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			if string(again) != tt.json {
				t.Errorf("re-encode:\ngot  %s\nwant %s", again, tt.json)
			}
		})
	}
}

// decodeStrict decodes exactly one JSON value into v, rejecting unknown
// fields and trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data")
	}
	return nil
}
