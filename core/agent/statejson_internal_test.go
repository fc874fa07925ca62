package agent

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/jsonvalue/jsontest"
	"github.com/pico-go/pico/storage"
)

type failer interface {
	Helper()
	Fatalf(string, ...any)
}

// stateReference decodes data with encoding/json alone, the fast paths off.
func stateReference[S any](data []byte) (S, error) {
	fastStates = false
	defer func() { fastStates = true }()
	return decodeState[S](&storage.Task{ID: 1, Kind: "k", State: data})
}

// sameStateAsReference fails t when the fast path of S takes data and
// encoding/json refuses it or reads another state; it reports whether the
// fast path took it. Either way decodeState must answer as encoding/json.
func sameStateAsReference[S any](t failer, data []byte) bool {
	t.Helper()
	var fast S
	took := any(&fast).(core.JSONDecoder).DecodeJSON(data)
	want, wantErr := stateReference[S](data)
	if took {
		if wantErr != nil {
			t.Fatalf("the fast path took %q; encoding/json refuses it: %v", data, wantErr)
		}
		if !reflect.DeepEqual(want, fast) { // cmp.Diff only then: it is slow
			t.Fatalf("the fast path read %q otherwise than encoding/json (-want +got):\n%s", data, cmp.Diff(want, fast))
		}
	}
	got, err := decodeState[S](&storage.Task{ID: 1, Kind: "k", State: data})
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() || err == nil && !reflect.DeepEqual(want, got) {
		t.Fatalf("decodeState(%q) = %+v, %v; encoding/json gives %+v, %v", data, got, err, want, wantErr)
	}
	return took
}

// checkStates holds every state's fast path to the reference on data.
func checkStates(t failer, data []byte) (took int) {
	t.Helper()
	for _, ok := range []bool{
		sameStateAsReference[GenerationState](t, data),
		sameStateAsReference[ToolState](t, data),
		sameStateAsReference[PostToolsState](t, data),
		sameStateAsReference[toolOutcomeView](t, data),
		sameStateAsReference[InputResult](t, data),
	} {
		if ok {
			took++
		}
	}
	return took
}

var genStateString = rapid.SampledFrom([]string{"", "x", "é😀", "tab\there", "quote\"", "\u2028", "\x00\x1f", "<&>", "\xff"})

func genIDs(t *rapid.T, label string) []storage.ID {
	switch rapid.IntRange(0, 3).Draw(t, label+"Shape") {
	case 0:
		return nil
	case 1:
		return []storage.ID{}
	}
	return rapid.SliceOfN(rapid.Custom(func(t *rapid.T) storage.ID { return storage.ID(rapid.Int64().Draw(t, "id")) }), 1, 3).Draw(t, label)
}

// genState draws a generation, tool or post_tools state, now and then
// with a field the fast path leaves to encoding/json; rare reports that.
func genState(t *rapid.T) (v any, rare bool) {
	switch rapid.IntRange(0, 3).Draw(t, "kind") {
	case 0:
		s := GenerationState{
			Inputs: genIDs(t, "inputs"), Attempt: rapid.IntRange(-1, 1<<40).Draw(t, "attempt"), MaxAttempts: rapid.Int().Draw(t, "max"),
			NotBefore: rapid.Int64().Draw(t, "notBefore"), AfterCollapse: storage.ID(rapid.Int64().Draw(t, "after")),
			OverflowRetried: rapid.Bool().Draw(t, "retried"), Assistant: storage.ID(rapid.Int64().Draw(t, "assistant")),
			Reason: genStateString.Draw(t, "reason"), Collapse: storage.ID(rapid.Int64().Draw(t, "collapse")),
			Config: GenerationConfig{Model: ModelRef{Provider: genStateString.Draw(t, "provider"), ModelID: genStateString.Draw(t, "model")},
				Thinking: genStateString.Draw(t, "thinking"), Profile: genStateString.Draw(t, "profile"), BudgetMs: rapid.Int64().Draw(t, "budget")},
		}
		if rapid.Bool().Draw(t, "selected") {
			s.Config.SelectedTools = rapid.SliceOf(genStateString).Draw(t, "tools")
		}
		if rapid.IntRange(0, 9).Draw(t, "rare") == 0 {
			s.Deferred = &ai.Deferred{Provider: "p", ID: "d"}
			return s, true
		}
		return s, false
	case 1:
		s := ToolState{
			Call:      ai.Block{Type: ai.BlockToolCall, ID: "call_" + genStateString.Draw(t, "id"), Name: genStateString.Draw(t, "name"), Arguments: json.RawMessage(`{"v":"a"}`)},
			Assistant: storage.ID(rapid.Int64().Draw(t, "assistant")), Offered: rapid.Bool().Draw(t, "offered"),
			BudgetMs: rapid.Int64().Draw(t, "budget"), Replay: ReplayPolicy(genStateString.Draw(t, "replay")),
			Limits: OutputLimits{MaxBytes: rapid.Int().Draw(t, "maxBytes"), MaxLines: rapid.Int().Draw(t, "maxLines"), Retain: genStateString.Draw(t, "retain")},
			Result: storage.ID(rapid.Int64().Draw(t, "result")),
		}
		if rapid.Bool().Draw(t, "args") {
			s.Args = json.RawMessage(rapid.SampledFrom([]string{`{}`, `{"v":"a"}`, `{"n":[1,2.5e3,null],"o":{"<":true}}`}).Draw(t, "argsText"))
		}
		switch rapid.IntRange(0, 9).Draw(t, "rare") {
		case 0:
			s.Job = &ToolJob{ID: 4, CancelOnAbort: true}
			return s, true
		case 1, 2:
			s.Output = &ToolOutputState{Content: []ai.Block{ai.Text("out")}, ToolResultData: ToolResultData{
				Terminate: rapid.Bool().Draw(t, "terminate"), Handoff: genStateString.Draw(t, "handoff"), Diags: []Diag{}}}
			if rapid.Bool().Draw(t, "added") {
				s.Output.AddedTools = rapid.SliceOf(genStateString).Draw(t, "addedTools")
			}
			return s, true
		}
		return s, false
	case 2:
		return InputResult{Status: InputStatus(rapid.SampledFrom([]string{"placed", "running", "done", "failed", ""}).Draw(t, "status")),
			RequestID: genStateString.Draw(t, "request"), PlacementEntryID: storage.ID(rapid.Int64().Draw(t, "placement")),
			ResultEntryID: storage.ID(rapid.Int64().Draw(t, "result")), Reason: genStateString.Draw(t, "reason")}, false
	}
	return PostToolsState{Assistant: storage.ID(rapid.Int64().Draw(t, "assistant")), Tools: genIDs(t, "tools"), Inputs: genIDs(t, "inputs"),
		Stopped: rapid.Bool().Draw(t, "stopped"), Reason: genStateString.Draw(t, "reason")}, false
}

// What this package writes, the fast paths read, as encoding/json does;
// its own type's fast path takes each state, unless it holds a field left
// to encoding/json.
func TestFastStateDecodingReadsWhatStatesWrite(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, rare := genState(t)
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var took bool
		switch v.(type) {
		case GenerationState:
			took = sameStateAsReference[GenerationState](t, raw)
		case ToolState:
			took = sameStateAsReference[ToolState](t, raw)
			if !sameStateAsReference[toolOutcomeView](t, raw) {
				t.Fatalf("the outcome fast path gave up on %s", raw)
			}
		case PostToolsState:
			took = sameStateAsReference[PostToolsState](t, raw)
		case InputResult:
			took = sameStateAsReference[InputResult](t, raw)
		}
		if took == rare {
			t.Fatalf("the fast path took %s: %t; want %t", raw, took, !rare)
		}
		checkStates(t, raw)
	})
}

// stateTokens are what rapid splices into a written state: keys of its
// fields given twice or in another case, unknown keys, nulls, values of
// the wrong kind, numbers an int refuses, escapes, broken grammar.
var stateTokens = []string{
	`"inputs":null,`, `"inputs":[],`, `"inputs":[1,null,2],`, `"inputs":[1.5],`, `"Inputs":[1],`, `"inputs":"1",`,
	`"config":null,`, `"config":{"model":null},`, `"config":{"model":{"provider":"p","Provider":"q"}},`, `"config":{"selectedTools":null},`,
	`"config":{"selectedTools":[null,"a"]},`, `"config":{"budgetMs":1e3},`, `"config":[],`, `"attempt":null,`, `"attempt":1.0,`,
	`"attempt":9223372036854775808,`, `"attempt":-0,`, `"maxAttempts":"3",`, `"deferred":null,`, `"deferred":{"provider":"p","id":"d"},`,
	`"reason":null,`, `"reason":1,`, `"call":null,`, `"call":{"type":"text","text":"t"},`, `"call":{"type":"nope"},`, `"call":[],`,
	`"args":null,`, `"args": [ 1 , 2 ] ,`, `"replay":"never",`, `"limits":null,`, `"limits":{"maxBytes":-1,"retain":"tail"},`,
	`"limits":{"MaxBytes":1},`, `"job":null,`, `"job":{"id":1},`, `"output":null,`, `"output":{"content":[]},`, `"result":true,`,
	`"tools":[1,2],`, `"tools":null,`, `"stopped":null,`, `"stopped":1,`, `"unknown":{"a":[1,{"b":null}]},`, `"x\u0079":1,`,
	"\"\x01\":1,", `"é":1,`, " ", ",", "}", "{", "]", `"`, `\`, "null", "n", "nu", "nul", `"attempt":nu5,`, `"config":n{},`,
	`"offered":nultrue,`, `"inputs":n[],`, `"output":{"terminate":true,"Terminate":false},`, `"output":{"addedTools":null,"handoff":"h"},`,
	`"output":{"addedTools":["a",null]},`, `"output":{"handoff":1},`, `"output":{"terminate":null},`, `"output":[],`, `"OUTPUT":null,`,
	`"status":"done",`, `"status":null,`, `"Status":"done",`, `"requestId":7,`, `"placementEntryId":1.5,`, `"resultEntryId":null,`,
}

func TestFastStateDecodingAgreesWithEncodingJSONOnSplicedTexts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, _ := genState(t)
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		checkStates(t, []byte(jsontest.Splice(t, string(raw), stateTokens)))
	})
}

// Every splice token, at the start of a state of each kind: some make
// texts the fast paths read, or they are not being tested on them.
func TestFastStateDecodingAgreesWithEncodingJSONOnEverySpliceToken(t *testing.T) {
	took := 0
	for _, base := range []string{
		`{"inputs":[2],"config":{"model":{},"selectedTools":null,"budgetMs":180000},"attempt":0,"maxAttempts":3}`,
		`{"call":{"type":"toolCall","id":"c","name":"a","arguments":{"v":"a"}},"assistant":18,"offered":true,"budgetMs":180000,"args":{"v":"a"},"limits":{}}`,
		`{"assistant":18,"tools":[19,20],"inputs":[2]}`,
		`{"status":"running","placementEntryId":3}`,
	} {
		for _, token := range stateTokens {
			took += checkStates(t, []byte(base[:1]+token+base[1:]))
		}
	}
	if took < 30 {
		t.Fatalf("the fast paths took %d spliced texts", took)
	}
}

// The fast paths give up on exactly what they must leave to encoding/json,
// and take the states every turn writes.
func TestFastStateDecodingGivesUpWhereEncodingJSONDecides(t *testing.T) {
	for _, text := range []string{
		`{"inputs":[1],"inputs":[2]}`,
		`{"Inputs":[1]}`,
		`{"attempt":1.5}`,
		`{"attempt":"1"}`,
		`{"deferred":{"provider":"p","id":"d"}}`,
		`{"config":{"model":{"modelId":"m","MODELID":"n"}}}`,
		`{"inputs":[1]} x`,
		`{"attempt":nu5}`,
	} {
		var s GenerationState
		if s.DecodeJSON([]byte(text)) {
			t.Errorf("the generation fast path took %s", text)
		}
		sameStateAsReference[GenerationState](t, []byte(text))
	}
	for _, text := range []string{
		`{"job":{"id":1,"cancelOnAbort":true}}`,
		`{"output":{"content":[]}}`,
		`{"call":{"type":"nope"}}`,
		`{"limits":{"maxBytes":1e3}}`,
	} {
		var s ToolState
		if s.DecodeJSON([]byte(text)) {
			t.Errorf("the tool fast path took %s", text)
		}
		sameStateAsReference[ToolState](t, []byte(text))
	}
	for _, text := range []string{
		`{"inputs":[2],"config":{"model":{},"selectedTools":null,"budgetMs":180000},"attempt":0,"maxAttempts":3}`,
		`{"attempt":1,"config":{"model":{"provider":"p","modelId":"m"},"selectedTools":["a"],"budgetMs":1},"inputs":[2],"maxAttempts":3,"notBefore":0,"deferred":null}`,
	} {
		if !sameStateAsReference[GenerationState](t, []byte(text)) {
			t.Errorf("the generation fast path gave up on %s", text)
		}
	}
	if text := `{"args":{"v":"a"},"assistant":18,"budgetMs":180000,"call":{"type":"toolCall","id":"call_1_0","name":"a","arguments":{"v":"a"}},"limits":{},"offered":true,"replay":"safe"}`; !sameStateAsReference[ToolState](t, []byte(text)) {
		t.Errorf("the tool fast path gave up on %s", text)
	}
	settled := `{"args":{"v":"a"},"assistant":18,"call":{"type":"toolCall","id":"c","name":"a","arguments":{"v":"a"}},"output":{"content":[{"type":"text","text":"a"}],"addedTools":["x"],"terminate":true,"handoff":"h","diags":[],"truncation":{"truncated":false}},"result":25}`
	if !sameStateAsReference[toolOutcomeView](t, []byte(settled)) {
		t.Errorf("the outcome fast path gave up on %s", settled)
	}
	if text := `{"status":"done","placementEntryId":3,"resultEntryId":18}`; !sameStateAsReference[InputResult](t, []byte(text)) {
		t.Errorf("the input result fast path gave up on %s", text)
	}
	if text := `{"assistant":18,"tools":[19,20],"inputs":[2]}`; !sameStateAsReference[PostToolsState](t, []byte(text)) {
		t.Errorf("the post_tools fast path gave up on %s", text)
	}
}

func FuzzStateDecoding(f *testing.F) {
	for _, text := range []string{
		`{"inputs":[2],"config":{"model":{},"selectedTools":null,"budgetMs":180000},"attempt":0,"maxAttempts":3}`,
		`{"args":{"v":"a"},"assistant":18,"budgetMs":180000,"call":{"type":"toolCall","id":"call_1_0","name":"a","arguments":{"v":"a"}},"limits":{},"offered":true,"replay":"safe"}`,
		`{"assistant":18,"tools":[19,20],"inputs":[2],"stopped":true,"reason":"r"}`,
		strings.Repeat(`{"config":`, 3),
	} {
		f.Add([]byte(text))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkStates(t, data)
	})
}

// genOutput draws a tool's output state with every field set or not, now
// and then with a part written through encoding/json or refused by it.
func genOutput(t *rapid.T) ToolOutputState {
	str := genStateString
	var s ToolOutputState
	switch rapid.IntRange(0, 3).Draw(t, "contentShape") {
	case 0:
	case 1:
		s.Content = []ai.Block{}
	default:
		for range rapid.IntRange(1, 3).Draw(t, "blocks") {
			switch rapid.IntRange(0, 3).Draw(t, "block") {
			case 0:
				s.Content = append(s.Content, ai.Text(str.Draw(t, "text")))
			case 1:
				s.Content = append(s.Content, ai.Block{Type: ai.BlockImage, Data: str.Draw(t, "data"), MimeType: "image/png"})
			case 2: // arguments encoding/json rewrites: the block goes through it
				s.Content = append(s.Content, ai.ToolCall("c", "f", json.RawMessage(`{"a": 1}`)))
			case 3:
				s.Content = append(s.Content, ai.Block{Type: ai.BlockText, Text: str.Draw(t, "text2"), TextSignature: str.Draw(t, "sig")})
			}
		}
	}
	s.Details = json.RawMessage(rapid.SampledFrom([]string{"", "", `{"k":1}`, `[1,"<b>"]`, `{"a": 1}`, `null`, "\"\u2028\""}).Draw(t, "details"))
	if len(s.Details) == 0 {
		s.Details = nil
	}
	switch rapid.IntRange(0, 3).Draw(t, "usage") {
	case 1:
		s.Usage = &ai.Usage{Input: rapid.Int64().Draw(t, "in"), Cost: ai.Cost{Total: 0.25}}
	case 2:
		s.Usage = &ai.Usage{Cost: ai.Cost{Input: math.Inf(1)}}
	}
	switch rapid.IntRange(0, 2).Draw(t, "added") {
	case 1:
		s.AddedTools = []string{}
	case 2:
		s.AddedTools = rapid.SliceOfN(str, 1, 3).Draw(t, "addedTools")
	}
	s.Terminate, s.IsError = rapid.Bool().Draw(t, "terminate"), rapid.Bool().Draw(t, "isError")
	s.Handoff, s.Delegated = str.Draw(t, "handoff"), storage.ID(rapid.Int64().Draw(t, "delegated"))
	switch rapid.IntRange(0, 2).Draw(t, "diags") {
	case 1:
		s.Diags = []Diag{}
	case 2:
		for range rapid.IntRange(1, 2).Draw(t, "diagCount") {
			s.Diags = append(s.Diags, Diag{Severity: str.Draw(t, "severity"), Message: str.Draw(t, "message"), Code: str.Draw(t, "code")})
		}
	}
	s.Truncation = Truncation{Truncated: rapid.Bool().Draw(t, "truncated"), TotalLines: rapid.Int().Draw(t, "tl"), TotalBytes: rapid.Int().Draw(t, "tb"),
		ShownLines: rapid.Int().Draw(t, "sl"), ShownBytes: rapid.Int().Draw(t, "sb"), SpillPath: str.Draw(t, "spill")}
	return s
}

// sameBytes fails t unless a's AppendJSON writes what json.Marshal writes
// of want (after what the buffer held), or fails as it fails.
func sameBytes(t *rapid.T, a core.JSONAppender, want any) {
	wantRaw, wantErr := json.Marshal(want)
	got, err := a.AppendJSON([]byte("prefix"))
	if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() || err == nil && string(got) != "prefix"+string(wantRaw) {
		t.Fatalf("AppendJSON = %s, %v; json.Marshal writes %s, %v", got, err, wantRaw, wantErr)
	}
}

// A call's output, its result data and its settlement are written by hand
// as json.Marshal writes them: the settlement as the map it replaced.
func TestToolOutputAppendJSONWritesWhatReflectionWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		out := genOutput(t)
		sameBytes(t, out, out)
		sameBytes(t, out.ToolResultData, out.ToolResultData)
		result := storage.ID(rapid.Int64().Draw(t, "result"))
		settlement := toolSettlement{Output: out, Result: result}
		asMap := map[string]any{"output": out, "result": result}
		if rapid.Bool().Draw(t, "job") {
			settlement.Job = &ToolJob{ID: 3, Detached: true}
			asMap["job"] = ToolJob{ID: 3, Detached: true}
		}
		sameBytes(t, settlement, asMap)
	})
}

// Every state, row and patch a turn writes is written by hand as
// json.Marshal writes it: the patches as the maps they replaced.
func TestStateAppendJSONWritesWhatReflectionWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, _ := genState(t)
		if s, ok := v.(ToolState); ok {
			if rapid.Bool().Draw(t, "fullOutput") {
				out := genOutput(t)
				s.Output = &out
			}
			if rapid.Bool().Draw(t, "job") {
				s.Job = &ToolJob{ID: storage.ID(rapid.Int64().Draw(t, "jobID")), CancelOnAbort: rapid.Bool().Draw(t, "cancel"), Detached: rapid.Bool().Draw(t, "detached")}
			}
			if rapid.IntRange(0, 3).Draw(t, "oddArgs") == 0 {
				s.Args = json.RawMessage(rapid.SampledFrom([]string{`{"a": 1}`, `"<b>"`, `[]`, "\"\u2028\""}).Draw(t, "oddArgsText"))
			}
			v = s
		}
		sameBytes(t, v.(core.JSONAppender), v)
		str := genStateString
		row := UsageRow{ConversationID: storage.ID(rapid.Int64().Draw(t, "conv")), TaskID: storage.ID(rapid.Int64().Draw(t, "task")),
			Kind: str.Draw(t, "kind"), Model: str.Draw(t, "model"), Attempt: rapid.Int().Draw(t, "attempt"), Outcome: str.Draw(t, "outcome")}
		switch rapid.IntRange(0, 2).Draw(t, "usage") {
		case 1:
			row.Usage = &ai.Usage{Input: rapid.Int64().Draw(t, "in"), TotalTokens: 3, Cost: ai.Cost{Total: 0.5}}
		case 2:
			row.Usage = &ai.Usage{Cost: ai.Cost{Output: math.NaN()}} // refused by encoding/json
		}
		sameBytes(t, row, row)
		op := SinkOp{Op: str.Draw(t, "op"), Text: str.Draw(t, "text"), Value: rapid.Bool().Draw(t, "value"), Job: storage.ID(rapid.Int64().Draw(t, "job"))}
		if rapid.Bool().Draw(t, "image") {
			op.Image = &ai.Block{Type: ai.BlockImage, Data: str.Draw(t, "data"), MimeType: "image/png"}
		}
		if rapid.Bool().Draw(t, "truncation") {
			op.Truncation = &Truncation{Truncated: true, TotalLines: rapid.Int().Draw(t, "lines"), SpillPath: str.Draw(t, "spill")}
		}
		if rapid.Bool().Draw(t, "sinkUsage") {
			op.Usage = &ai.Usage{Output: rapid.Int64().Draw(t, "out")}
		}
		switch rapid.IntRange(0, 2).Draw(t, "names") {
		case 1:
			op.Names = []string{}
		case 2:
			op.Names = rapid.SliceOfN(str, 1, 3).Draw(t, "nameList")
		}
		if rapid.Bool().Draw(t, "diag") {
			op.Diag = &Diag{Severity: str.Draw(t, "severity"), Message: str.Draw(t, "message"), Code: str.Draw(t, "code")}
		}
		sameBytes(t, op, op)
		attempt, notBefore := rapid.Int().Draw(t, "attemptNo"), rapid.Int64().Draw(t, "notBefore")
		sameBytes(t, attemptStart{Attempt: attempt, NotBefore: notBefore}, map[string]any{"attempt": attempt, "notBefore": notBefore})
		assistant := storage.ID(rapid.Int64().Draw(t, "assistant"))
		sameBytes(t, answeredWith{assistant}, map[string]any{"assistant": assistant})
		var args json.RawMessage
		if text := rapid.SampledFrom([]string{"nil", "", `{}`, `{"v":"a"}`, `{"a": 1}`, `"<&>"`, `[1,2]`}).Draw(t, "args"); text != "nil" {
			args = json.RawMessage(text)
		}
		limits := OutputLimits{MaxBytes: rapid.IntRange(0, 2).Draw(t, "maxBytes"), MaxLines: rapid.IntRange(0, 2).Draw(t, "maxLines"), Retain: str.Draw(t, "retain")}
		replay := ReplayPolicy(str.Draw(t, "replay"))
		sameBytes(t, toolStart{Args: args, Limits: limits, Replay: replay}, map[string]any{"args": args, "replay": replay, "limits": limits})
	})
}

// jsonKeys lists the JSON member names encoding/json gives t's fields,
// embedded structs' included.
func jsonKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
		case f.Anonymous && name == "":
			keys = append(keys, jsonKeys(f.Type)...)
		case name == "":
			keys = append(keys, f.Name)
		default:
			keys = append(keys, name)
		}
	}
	return keys
}

// Each fast path reads every member of its type: a field added to a state
// and not to its fast path fails here, instead of being skipped.
func TestFastPathsKnowEveryFieldOfTheirTypes(t *testing.T) {
	for _, c := range []struct {
		typ  any
		keys []string
	}{
		{GenerationState{}, generationKeys}, {GenerationConfig{}, generationConfigKeys}, {ModelRef{}, modelRefKeys},
		{ToolState{}, toolKeys}, {OutputLimits{}, outputLimitsKeys}, {PostToolsState{}, postToolsKeys},
		{InputResult{}, inputResultKeys}, {toolOutcomeView{}, outcomeViewKeys}, {toolOutcome{}, outcomeKeys},
		{ToolOutputState{}, []string{"content", "details", "usage", "addedTools", "terminate", "handoff", "delegated", "diags", "truncation", "isError"}},
		{Truncation{}, []string{"truncated", "totalLines", "totalBytes", "shownLines", "shownBytes", "spillPath"}},
		{Diag{}, []string{"severity", "message", "code"}},
		{toolSettlement{}, []string{"job", "output", "result"}},
		{UsageRow{}, []string{"conversationId", "taskId", "kind", "model", "attempt", "outcome", "usage"}},
		{SinkOp{}, []string{"op", "text", "image", "truncation", "usage", "names", "value", "job", "diag"}},
		{ToolJob{}, []string{"id", "cancelOnAbort", "detached"}},
		{attemptStart{}, []string{"attempt", "notBefore"}}, {answeredWith{}, []string{"assistant"}},
		{toolStart{}, []string{"args", "limits", "replay"}},
	} {
		if got := jsonKeys(reflect.TypeOf(c.typ)); !slices.Equal(got, c.keys) {
			t.Errorf("%T has the members %v; its hand-written path knows %v", c.typ, got, c.keys)
		}
	}
	// The outcome a post_tools reads is ToolResultData's members of the
	// same names.
	data := jsonKeys(reflect.TypeOf(ToolResultData{}))
	for _, k := range outcomeKeys {
		if !slices.Contains(data, k) {
			t.Errorf("the outcome reads %q, which ToolResultData does not have", k)
		}
	}
}
