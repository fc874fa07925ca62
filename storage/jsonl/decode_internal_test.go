package jsonl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

type failer interface {
	Helper()
	Fatalf(string, ...any)
}

// sameAsSlow fails t when the fast path takes a line that encoding/json,
// strict as parseLine runs it, refuses or reads otherwise; it reports
// whether the fast path took it.
func sameAsSlow(t failer, text []byte) bool {
	t.Helper()
	got, ok := decodeLine(text, nil)
	if !ok {
		return false
	}
	want, err := parseLineSlow(text)
	if err != nil {
		t.Fatalf("the fast path took %q; encoding/json refuses it: %v", text, err)
	}
	if !reflect.DeepEqual(want, got) { // cmp.Diff only then: it is slow
		t.Fatalf("the fast path read %q otherwise than encoding/json (-want +got):\n%s", text, cmp.Diff(want, got))
	}
	return true
}

var (
	genID     = rapid.Map(rapid.Int64Range(-2, 1<<53), func(n int64) storage.ID { return storage.ID(n) })
	genString = rapid.SampledFrom([]string{"", "k", "pi.inbox", "é😀", "tab\there", "quote\"", "\u2028<&>", "\x00\x1f", "\xff"})
	genRaw    = rapid.SampledFrom([]string{`null`, `1`, `-2.5e3`, `"s"`, `[]`, `{}`, `{"a":[1,{"b":null}],"<":"\u2028"}`, `[true,false]`})
	genIDs    = rapid.SliceOfN(genID, 0, 3)
)

func maybe[T any](t *rapid.T, name string, gen func() T) (v T) {
	if rapid.Bool().Draw(t, name) {
		v = gen()
	}
	return v
}

func genMessages(t *rapid.T) []ai.Message {
	return rapid.SliceOfN(rapid.Custom(func(t *rapid.T) ai.Message {
		switch rapid.IntRange(0, 2).Draw(t, "role") {
		case 0:
			return ai.UserText(genString.Draw(t, "text"), rapid.Int64().Draw(t, "ts"))
		case 1:
			return ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text(genString.Draw(t, "text")),
				ai.ToolCall("call_1", "a", json.RawMessage(`{"v":"a"}`))), StopReason: ai.StopToolUse,
				Usage: &ai.Usage{Input: rapid.Int64().Draw(t, "in"), Cost: ai.Cost{Total: rapid.Float64().Draw(t, "cost")}}}
		}
		return ai.Message{Role: ai.RoleToolResult, ToolCallID: "call_1", ToolName: "a", Content: ai.Blocks(ai.Text("r")), IsError: ai.Bool(false)}
	}), 0, 2).Draw(t, "messages")
}

// genWrite draws a write with any of the fields set, whatever its type:
// decoding is structural.
func genWrite(t *rapid.T) storage.Write {
	w := storage.Write{Type: rapid.SampledFrom([]storage.WriteType{storage.WriteValueSet, storage.WriteListAppend, storage.WriteEntry,
		storage.WriteTask, storage.WritePatch, storage.WriteSettle, storage.WriteCreateConversation, "other"}).Draw(t, "type")}
	w.Addr = maybe(t, "addr", func() *storage.Address {
		scope := rapid.SampledFrom([]storage.Scope{storage.SessionScope(), storage.ConversationScope(3), storage.ScratchScope(1 << 40)}).Draw(t, "scope")
		return &storage.Address{Scope: scope, Namespace: genString.Draw(t, "ns"), Key: genString.Draw(t, "key"), Rewind: rapid.Bool().Draw(t, "rewind")}
	})
	w.Value = maybe(t, "value", func() json.RawMessage { return json.RawMessage(genRaw.Draw(t, "raw")) })
	w.Element = maybe(t, "element", func() storage.ID { return genID.Draw(t, "id") })
	w.Conversation = maybe(t, "conversation", func() *storage.Conversation {
		c := &storage.Conversation{ID: genID.Draw(t, "id"), Owner: genID.Draw(t, "owner")}
		c.Parent = maybe(t, "parent", func() *storage.ParentRef {
			return &storage.ParentRef{ConversationID: genID.Draw(t, "c"), At: genID.Draw(t, "at")}
		})
		return c
	})
	w.Entry = maybe(t, "entry", func() *storage.Entry {
		e := &storage.Entry{ID: genID.Draw(t, "id"), ConversationID: genID.Draw(t, "conv"), Kind: genString.Draw(t, "kind"),
			ByTaskID: genID.Draw(t, "by"), Key: genString.Draw(t, "key"), Head: genID.Draw(t, "head"), Model: genMessages(t)}
		e.Data = maybe(t, "data", func() json.RawMessage { return json.RawMessage(genRaw.Draw(t, "raw")) })
		e.Edits = maybe(t, "edits", func() []storage.ContextEdit {
			return []storage.ContextEdit{{Target: genID.Draw(t, "target"), Action: storage.EditReplace, Messages: genMessages(t)}}
		})
		return e
	})
	w.Task = maybe(t, "task", func() *storage.Task {
		tk := &storage.Task{ID: genID.Draw(t, "id"), ConversationID: genID.Draw(t, "conv"), Kind: genString.Draw(t, "kind"),
			Status: genString.Draw(t, "status"), Role: storage.RoleStart, After: genIDs.Draw(t, "after"),
			Background: rapid.Bool().Draw(t, "bg"), Owns: genIDs.Draw(t, "owns"), Abort: rapid.Bool().Draw(t, "abort")}
		tk.State = maybe(t, "state", func() json.RawMessage { return json.RawMessage(genRaw.Draw(t, "raw")) })
		return tk
	})
	w.ID = maybe(t, "id", func() storage.ID { return genID.Draw(t, "id") })
	w.Status = genString.Draw(t, "status")
	w.Role = rapid.SampledFrom([]storage.TaskRole{"", storage.RoleInflight, storage.RoleTerminal}).Draw(t, "role")
	w.State = maybe(t, "state", func() json.RawMessage { return json.RawMessage(genRaw.Draw(t, "raw")) })
	w.Abort = rapid.Bool().Draw(t, "abort")
	w.Owns = genIDs.Draw(t, "owns")
	return w
}

// genLine draws a line as json.Marshal writes its diskLine: some of its
// writes with a state merge or drop, whatever their type.
func genLine(t *rapid.T) []byte {
	l := diskLine{First: genID.Draw(t, "first"), Task: maybe(t, "task", func() storage.ID { return genID.Draw(t, "task") })}
	for _, w := range rapid.SliceOfN(rapid.Custom(genWrite), 0, 4).Draw(t, "writes") {
		dw := diskWrite{Write: w}
		if rapid.IntRange(0, 3).Draw(t, "merge") == 0 {
			dw.StateMerge = maybe(t, "stateMerge", func() json.RawMessage { return json.RawMessage(genRaw.Draw(t, "raw")) })
			dw.StateDrop = maybe(t, "stateDrop", func() []string { return rapid.SliceOfN(genString, 0, 2).Draw(t, "drop") })
		}
		l.Writes = append(l.Writes, dw)
	}
	if l.Writes == nil && rapid.Bool().Draw(t, "emptyWrites") {
		l.Writes = []diskWrite{}
	}
	raw, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Every line Commit can write, the fast path reads, as encoding/json does.
func TestDecodeLineReadsWhatCommitWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		if text := genLine(t); !sameAsSlow(t, text) {
			t.Fatalf("the fast path gave up on %s", text)
		}
	})
}

// Lines read one after another into one array of writes (as a replay reads
// them) read as each alone: nothing of a longer line before stays in a
// shorter one's writes.
func TestDecodeLineReusingItsWritesReadsEachLineAsEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var writes []storage.Write
		for i, n := 0, rapid.IntRange(2, 6).Draw(t, "lines"); i < n; i++ {
			text := genLine(t)
			got, ok := decodeLine(text, writes)
			if !ok {
				t.Fatalf("the fast path gave up on %s", text)
			}
			want, err := parseLineSlow(text)
			if err != nil || !reflect.DeepEqual(want, got) {
				t.Fatalf("line %d read into a reused array (-want +got):\n%s", i, cmp.Diff(want, got))
			}
			writes = got.Writes
		}
	})
}

// lineTokens are what rapid splices into a written line: keys given twice
// or in another case, unknown keys, nulls where they mean something and
// where they do not, values of the wrong kind, scopes out of form.
var lineTokens = []string{
	`"first":2,`, `"First":2,`, `"first":null,`, `"first":1.5,`, `"task":"1",`, `"writes":null,`, `"writes":[],`, `"extra":1,`,
	`"type":"entry",`, `"TYPE":"entry",`, `"addr":null,`, `"addr":{"scope":null},`, `"addr":{"scope":{}},`,
	`"addr":{"scope":{"session":false}},`, `"addr":{"scope":{"session":true,"session":true}},`, `"addr":{"scope":{"conversation":0}},`,
	`"addr":{"scope":{"scratch":2,"conversation":2}},`, `"addr":{"scope":{"Session":true}},`, `"addr":{"namespace":"n","nameSpace":"m"},`,
	`"value":null,`, `"value": [ 1 , 2 ],`, `"entry":null,`, `"entry":{"model":null},`, `"entry":{"model":[null]},`,
	`"entry":{"model":[{"role":"user","content":"a","Role":"x"}]},`, `"entry":{"edits":[{"target":1,"bogus":2}]},`,
	`"task":{"after":null,"owns":[1,null]},`, `"task":{"after":[1.5]},`, `"conversation":{"parent":null},`,
	`"conversation":{"parent":{"at":1,"at":2}},`, `"abort":null,`, `"abort":"true",`, `"owns":[],`, `"state":{},`,
	"\"\x01\":1,", `"é":1,`, `"\u0074ype":"x",`, " ", ",", "}", "{", "]", "[", `"`, `\`, "null", "n", "nu", "nul",
	`"first":nul1,`, `"writes":n[],`, `"abort":nutrue,`, `"owns":n[3],`, `"addr":n{"scope":{"session":true}},`,
}

func TestDecodeLineAgreesWithEncodingJSONOnSplicedLines(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		text := string(genLine(t))
		for range rapid.IntRange(1, 3).Draw(t, "splices") {
			at := rapid.IntRange(0, len(text)).Draw(t, "at")
			if i := strings.Index(text, `"writes":[{`); i >= 0 && rapid.Bool().Draw(t, "inWrite") {
				at = i + len(`"writes":[{`) // where a write's member surely fits
			}
			text = text[:at] + rapid.SampledFrom(lineTokens).Draw(t, "token") + text[at:]
		}
		sameAsSlow(t, []byte(text))
	})
}

// A value nested to encoding/json's limit is read on the fast path.
func TestDecodeLineTakesAValueAtTheDepthLimit(t *testing.T) {
	text := `{"first":1,"writes":[{"type":"x","value":` + strings.Repeat("[", 9997) + strings.Repeat("]", 9997) + `}]}`
	if !sameAsSlow(t, []byte(text)) {
		t.Fatal("the fast path gave up on a value at the depth limit")
	}
}

// Every splice token, at the start of a line and of its first write.
func TestDecodeLineAgreesWithEncodingJSONOnEverySpliceToken(t *testing.T) {
	base := `{"first":1,"writes":[{"type":"entry","entry":{"id":1,"conversationId":1,"kind":"k","model":[{"role":"user","content":"a","timestamp":1}]}}]}`
	took := 0
	for _, token := range lineTokens {
		for _, at := range []int{1, strings.Index(base, `[{`) + 2} {
			if sameAsSlow(t, []byte(base[:at]+token+base[at:])) {
				took++
			}
		}
	}
	// Some tokens make lines the fast path reads (a new member that is
	// fine where it lands), or it is not being tested on them.
	if took < 5 {
		t.Fatalf("the fast path took %d spliced lines", took)
	}
}

// A line the fast path gives up on gets encoding/json's answer: the same
// batch, or the same error.
func TestParseLineGivesEncodingJSONsAnswerWhereTheFastPathGivesUp(t *testing.T) {
	for _, text := range []string{
		`{"first":1,"First":2,"writes":[]}`,
		`{"first":1,"writes":[{"type":"x","addr":{"scope":{"Session":true}}}]}`,
		`{"first":1,"writes":[{"type":"x","addr":{"scope":{"conversation":0}}}]}`,
		`{"first":1,"writes":[{"type":"x","bogus":1}]}`,
		`{"first":1,"writes":[{"type":"x","addr":{"scope":{}}}]}`,
		`{"first":1,"writes":[{"type":"x","addr":{"scope":{"conversation":2,"scratch":3}}}]}`,
		`{"first":1,"writes":[{"type":"x","addr":{"scope":{"session":true,"session":true}}}]}`,
		`{"first":1,"writes":[{"type":"x","addr":{"scope":{"session":false}}}]}`,
		`{"first":1,"writes":[{"type":"x","entry":{"id":1},"entry":{"kind":"k"}}]}`,
		`{"first":1,"writes":[{"type":"x","owns":[1,2],"owns":[3]}]}`,
		`{"first":1,"writes":[{"type":"entry","entry":{"model":[{"role":"nobody"}]}}]}`,
		`{"first":1,"writes":[]}}`,
		`{"first":1.5,"writes":[]}`,
		`{"first":nul1,"writes":[]}`,
		`{"first":1,"writes":n[]}`,
		`{"first":1,"writes":[{"type":"x","abort":nutrue,"owns":n[3]}]}`,
		`{"first":1,"writes":[{"type":"x","addr":n{"scope":{"session":true},"namespace":"x"}}]}`,
		// A value nested one level past encoding/json's limit (10,000 with
		// the line's object, its writes and the write).
		`{"first":1,"writes":[{"type":"x","value":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}]}`,
	} {
		if _, ok := decodeLine([]byte(text), nil); ok {
			t.Errorf("the fast path took %s", text)
		}
		got, gotErr := parseLine([]byte(text), nil)
		want, wantErr := parseLineSlow([]byte(text))
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() || !cmp.Equal(got, want) {
			t.Errorf("parseLine(%s) = %+v, %v; encoding/json gives %+v, %v", text, got, gotErr, want, wantErr)
		}
	}
}

// forGoldenBatches calls fn with every batch the golden traces commit
// (every scenario's), as a line.
func forGoldenBatches(t *testing.T, fn func(l line)) {
	t.Helper()
	paths, err := filepath.Glob("../../fixtures/traces/*.jsonl")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden traces: %v", err)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var r struct {
				K      string          `json:"k"`
				Detail json.RawMessage `json:"detail"`
			}
			var batch struct {
				First  storage.ID      `json:"first"`
				Writes []storage.Write `json:"writes"`
			}
			if err := json.Unmarshal([]byte(rec), &r); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if r.K != "commit" {
				continue
			}
			if err := json.Unmarshal(r.Detail, &batch); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if len(batch.Writes) > 0 {
				fn(line{First: batch.First, Writes: batch.Writes})
			}
		}
	}
}

// Every batch the golden traces commit, written as Commit writes it, takes
// the fast path and reads as encoding/json reads it.
func TestDecodeLineReadsEveryBatchOfTheGoldenTraces(t *testing.T) {
	n := 0
	forGoldenBatches(t, func(l line) {
		text, err := encodeLine(nil, l)
		if err != nil {
			t.Fatal(err)
		}
		n++
		if !sameAsSlow(t, text) {
			t.Errorf("the fast path gave up on %s", text)
		}
	})
	if n < 100 {
		t.Fatalf("only %d batches in the golden traces", n)
	}
}

func FuzzLineDecoding(f *testing.F) {
	f.Add([]byte(`{"first":1,"writes":[{"type":"createConversation","conversation":{"id":1,"parent":{"conversationId":2,"at":3}}}]}`))
	f.Add([]byte(`{"first":3,"task":2,"writes":[{"type":"list.append","addr":{"scope":{"scratch":2},"namespace":"f"},"value":1}]}`))
	f.Add([]byte(`{"first":4,"writes":[{"type":"entry","entry":{"id":4,"conversationId":1,"kind":"user","model":[{"role":"user","content":"hi","timestamp":1}]}}]}`))
	f.Add([]byte(`{"first":5,"writes":[{"type":"settle","id":2,"status":"done","role":"terminal","state":{"a":[1]},"owns":[3]}]}`))
	f.Add([]byte(`{"first":6,"writes":[{"type":"task","task":{"id":6,"conversationId":1,"kind":"k","status":"s","role":"start","after":[2],"background":true}}]}`))
	f.Add([]byte(`{"first":7,"writes":[{"type":"settle","id":2,"status":"done","role":"terminal","stateMerge":{"output":{"a":1},"result":9},"stateDrop":["args"]}]}`))
	f.Fuzz(func(t *testing.T, text []byte) {
		sameAsSlow(t, text)
	})
}

// sameBytesAsMarshal fails t when encodeLine writes l otherwise than
// json.Marshal, or fails otherwise.
func sameBytesAsMarshal(t failer, l line) {
	t.Helper()
	want, wantErr := json.Marshal(l)
	got, err := encodeLine(nil, l)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("encodeLine failed with %v; json.Marshal with %v", err, wantErr)
	}
	if string(got) != string(want) {
		t.Fatalf("encodeLine wrote\n%s\njson.Marshal writes\n%s", got, want)
	}
}

// encodeStrings are strings and raw values at every corner of escaping:
// what encoding/json escapes, replaces or compacts, and what it keeps.
var (
	encodeStrings = []string{"", "plain", "a<b", "a>b", "a&b", "quote\"", "back\\slash", "<&>", "\x00\x1f\x7f", "\t\n\r\b\f", "é😀", "\u2028\u2029", "\xff\xfe", "\xed\xa0\x80", "~"}
	encodeRaws    = []string{`null`, `1`, `"s"`, ` { "a" : [ 1 , 2 ] } `, "\t[\n]\r", "[\t1]", "[\n1]", "[\r1]", `[1 ]`, `"<"`, `">"`, `"&"`, `"<&>"`, `"\u2028"`, "\"\u2028\u2029\"", `"é"`, "\"\xff\"", `{"a":"b c"}`, `[1,`, `{"a"}`, ``, `nul`}
)

func TestEncodeLineWritesWhatJSONMarshalWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var l line
		if err := json.Unmarshal(genLine(t), &l); err != nil {
			t.Fatal(err)
		}
		str := rapid.SampledFrom(encodeStrings)
		rawOf := rapid.SampledFrom(encodeRaws)
		for i := range l.Writes {
			w := &l.Writes[i]
			if rapid.Bool().Draw(t, "corners") {
				w.Type, w.Status = storage.WriteType(str.Draw(t, "type")), str.Draw(t, "status")
				w.Value, w.State = json.RawMessage(rawOf.Draw(t, "value")), json.RawMessage(rawOf.Draw(t, "state"))
				if w.Addr != nil {
					w.Addr.Namespace, w.Addr.Key = str.Draw(t, "ns"), str.Draw(t, "key")
				}
				if w.Entry != nil {
					w.Entry.Kind, w.Entry.Data = str.Draw(t, "kind"), json.RawMessage(rawOf.Draw(t, "data"))
				}
				if w.Task != nil {
					w.Task.Kind, w.Task.State = str.Draw(t, "kind"), json.RawMessage(rawOf.Draw(t, "state"))
				}
			}
			if w.Addr != nil && rapid.IntRange(0, 20).Draw(t, "badScope") == 0 {
				w.Addr.Scope = storage.Scope{}
			}
		}
		if rapid.IntRange(0, 10).Draw(t, "nilWrites") == 0 {
			l.Writes = nil
		}
		sameBytesAsMarshal(t, l)
	})
}

// Every corner string in every string field, every corner raw value in
// every raw field: the bytes json.Marshal writes, or its error.
func TestEncodeLineAtEveryCorner(t *testing.T) {
	for _, s := range encodeStrings {
		for _, r := range encodeRaws {
			raw := json.RawMessage(r)
			sameBytesAsMarshal(t, line{First: 1, Task: 2, Writes: []storage.Write{
				{Type: storage.WriteType(s), Addr: &storage.Address{Scope: storage.ScratchScope(2), Namespace: s, Key: s, Rewind: true},
					Value: raw, Status: s, Role: storage.TaskRole(s), State: raw},
				{Type: "entry", Entry: &storage.Entry{ID: 3, ConversationID: 1, Kind: s, Key: s, Data: raw,
					Edits: []storage.ContextEdit{{Target: 1, Action: storage.EditAction(s)}}}},
				{Type: "task", Task: &storage.Task{ID: 4, ConversationID: 1, Kind: s, Status: s, Role: storage.TaskRole(s), State: raw}},
			}})
		}
	}
}

// Every batch of the golden traces encodes as json.Marshal encodes it.
func TestEncodeLineWritesEveryBatchOfTheGoldenTracesAsJSONMarshal(t *testing.T) {
	n := 0
	forGoldenBatches(t, func(l line) {
		sameBytesAsMarshal(t, l)
		n++
	})
	if n < 100 {
		t.Fatalf("only %d batches in the golden traces", n)
	}
}

func FuzzLineEncoding(f *testing.F) {
	f.Add([]byte(`{"first":1,"writes":[{"type":"createConversation","conversation":{"id":1,"parent":{"conversationId":2,"at":3}}}]}`))
	f.Add([]byte(`{"first":4,"writes":[{"type":"entry","entry":{"id":4,"conversationId":1,"kind":"u<","data":{ "a" : "\u2028" },"model":[{"role":"user","content":"hi","timestamp":1}]}}]}`))
	f.Add([]byte(`{"first":5,"task":2,"writes":[{"type":"settle","id":2,"status":"d\"","role":"terminal","state":[1, 2],"owns":[3],"abort":true}]}`))
	f.Fuzz(func(t *testing.T, text []byte) {
		l, err := parseLineSlow(text)
		if err != nil {
			return
		}
		sameBytesAsMarshal(t, l)
	})
}

// BenchmarkLineCodec encodes and decodes every batch of the golden traces
// by hand and, for the ratio, with encoding/json.
func BenchmarkLineCodec(b *testing.B) {
	t := &testing.T{}
	var lines []line
	var texts [][]byte
	forGoldenBatches(t, func(l line) {
		lines = append(lines, l)
		text, _ := json.Marshal(l)
		texts = append(texts, text)
	})
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for range b.N {
			for _, l := range lines {
				var err error
				if buf, err = encodeLine(buf[:0], l); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("encode-json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			for _, l := range lines {
				if _, err := json.Marshal(l); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			for _, text := range texts {
				if _, err := parseLine(text, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("decode-encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			for _, text := range texts {
				if _, err := parseLineSlow(text); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
