package schema

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pico-go/pico/conformance/kit"
)

var update = flag.Bool("update", false, "rewrite the schema files")

const (
	schemaDir   = "../../fixtures/schema/" + Version
	scenarioDir = "../../fixtures/scenarios"
)

func schemaFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(schemaDir, name+".schema.json"))
	if err != nil {
		t.Fatalf("%v (go test ./conformance/schema -update writes it)", err)
	}
	return b
}

// The checked-in schemas are what the generator makes of the Go types;
// -update rewrites them.
func TestSchemaFilesAreGenerated(t *testing.T) {
	if *update {
		if err := os.MkdirAll(schemaDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range Roots {
		got := Marshal(Generate(r))
		path := filepath.Join(schemaDir, r.Name+".schema.json")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if want := schemaFile(t, r.Name); !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the Go types generate (if intended: go test ./conformance/schema -update)", path)
		}
	}
}

// Every entry fixture validates against the entry schema.
func TestEntryFixturesValidate(t *testing.T) {
	paths, err := filepath.Glob("../../fixtures/entries/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no entry fixtures: %v", err)
	}
	s := schemaFile(t, "entry")
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(s, data); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
	}
}

// Every scenario's journal validates against the outcome schema, and
// every record and event the scenario's session exchanges (each watch
// event, including previews' delta ops; each conversation, entry, task,
// input result, inbox item, usage row and final view) against its own.
func TestScenarioRecordsAndEventsValidate(t *testing.T) {
	scs, err := kit.LoadScenarios(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string][]byte{}
	for _, r := range Roots {
		schemas[r.Name] = schemaFile(t, r.Name)
	}
	seen := map[string]int{}
	for _, sc := range scs {
		if err := Validate(schemas["outcome"], sc.Expected); err != nil {
			t.Errorf("scenario %s: its journal: %v", sc.Name, err)
		}
		var problems []string
		_, err := kit.RunRecorded(context.Background(), sc, 1, func(name string, v any) {
			data, err := json.Marshal(v)
			if err == nil {
				err = Validate(schemas[name], data)
			}
			if err != nil && len(problems) < 3 {
				problems = append(problems, name+" "+string(data)+": "+err.Error())
			}
			seen[name]++
			if ev, ok := v.(interface{ MarshalJSON() ([]byte, error) }); ok && name == "conversation-event" {
				var m struct {
					Type string          `json:"type"`
					Ops  json.RawMessage `json:"ops"`
				}
				b, _ := ev.MarshalJSON()
				if json.Unmarshal(b, &m) == nil && m.Type == "task_output" {
					var ops []json.RawMessage
					_ = json.Unmarshal(m.Ops, &ops)
					for _, op := range ops {
						seen["delta-op"]++
						if err := Validate(schemas["delta-op"], op); err != nil && len(problems) < 3 {
							problems = append(problems, "delta-op "+string(op)+": "+err.Error())
						}
					}
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("scenario %s: %s", sc.Name, p)
		}
	}
	for _, name := range []string{"conversation-event", "delta-op", "conversation", "entry", "task", "input-result", "inbox-item", "usage-row", "conversation-view"} {
		if seen[name] == 0 {
			t.Errorf("no scenario exchanged a %s; the test checks nothing of it", name)
		}
	}
}

// Every request the runner writes and every reply the Go port writes
// validates against the protocol's schemas.
func TestProtocolMessagesValidate(t *testing.T) {
	scs, err := kit.LoadScenarios(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, sc := range scs {
		open, actions, err := sc.Requests()
		if err != nil {
			t.Fatal(err)
		}
		_ = enc.Encode(open)
		for _, a := range actions {
			_ = enc.Encode(a)
		}
		_ = enc.Encode(kit.Request{Type: kit.RequestOutcome})
	}
	_ = enc.Encode(kit.Request{Type: kit.RequestClose})
	requests := bytes.Clone(in.Bytes())
	var out bytes.Buffer
	if err := kit.Serve(context.Background(), &in, &out); err != nil {
		t.Fatal(err)
	}
	check := func(name string, r io.Reader) int {
		n := 0
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			n++
			if err := Validate(schemaFile(t, name), sc.Bytes()); err != nil {
				t.Errorf("%s line %d: %v", name, n, err)
			}
		}
		return n
	}
	if nr, np := check("request", bytes.NewReader(requests)), check("reply", &out); np != nr-1 {
		t.Errorf("%d requests, %d replies; want one reply to each but close", nr, np)
	}
}

// The validator refuses what the schemas forbid, naming where.
func TestValidatorRefuses(t *testing.T) {
	s := Marshal(Generate(Roots[0])) // entry
	for _, tc := range []struct{ data, want string }{
		{`{"id":1,"conversationId":1}`, `member "kind" is required`},
		{`{"id":"x","conversationId":1,"kind":"user"}`, "id: a string is not integer"},
		{`{"id":1,"conversationId":1,"kind":"user","extra":true}`, `member "extra" is not allowed`},
		{`{"id":1,"conversationId":1,"kind":"user","model":[{"role":"user","content":7,"timestamp":0}]}`, "model[0].content: matches no alternative"},
		{`{"id":1.5,"conversationId":1,"kind":"user"}`, "id: a number is not integer"},
	} {
		err := Validate(s, []byte(tc.data))
		var ve *ValidationError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%s) = %v; want a ValidationError with %q", tc.data, err, tc.want)
		}
	}
}
