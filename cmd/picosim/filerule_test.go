package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The rule's reading of the file tools: reads by 1-based offset and limit,
// past the end an error only beyond the line after the last; writes
// replace; an edit changes the one occurrence or fails changing nothing.
func TestTheFileRuleReadsTheTools(t *testing.T) {
	const file = "one\ntwo\nthree"
	run := func(tool, args string, existed bool) *fileRun {
		return &fileRun{tool: tool, args: json.RawMessage(args), before: file, existed: existed}
	}
	str := func(s string) *string { return &s }
	cases := []struct {
		name  string
		run   *fileRun
		text  string
		fails bool
		after *string
	}{
		{"read all", run("read", `{"path":"f"}`, true), file, false, str(file)},
		{"read from 2", run("read", `{"path":"f","offset":2}`, true), "two\nthree", false, str(file)},
		{"read 1 from 2", run("read", `{"path":"f","offset":2,"limit":1}`, true), "two\n", false, str(file)},
		{"read just past the end", run("read", `{"path":"f","offset":4}`, true), "", false, str(file)},
		{"read beyond", run("read", `{"path":"f","offset":5}`, true), "", true, str(file)},
		{"read a missing file", run("read", `{"path":"f"}`, false), "", true, nil},
		{"write", run("write", `{"path":"f","content":"new"}`, true), "", false, str("new")},
		{"edit once", run("edit", `{"path":"f","oldText":"two","newText":"2"}`, true), "", false, str("one\n2\nthree")},
		{"edit none", run("edit", `{"path":"f","oldText":"four","newText":"4"}`, true), "", true, str(file)},
		{"edit many", run("edit", `{"path":"f","oldText":"o","newText":"0"}`, true), "", true, str(file)},
		{"edit empty", run("edit", `{"path":"f","oldText":"","newText":"x"}`, true), "", true, str(file)},
		{"edit a missing file", run("edit", `{"path":"f","oldText":"two","newText":"2"}`, false), "", true, nil},
	}
	for _, tc := range cases {
		text, fails, after := fileExpected(tc.run)
		if text != tc.text || fails != tc.fails || (after == nil) != (tc.after == nil) || after != nil && *after != *tc.after {
			t.Errorf("%s: %q, fails %v, after %s; want %q, %v, %s", tc.name, text, fails, showFile(deref(after), after != nil), tc.text, tc.fails, showFile(deref(tc.after), tc.after != nil))
		}
	}
}

// A file call's settlement is held to the rule: the right result passes;
// a wrong read, a failure that should not be, a change a failed edit made,
// a new_context call not asking for its message, break it; a call another
// write overlapped is not judged.
func TestAFileToolDoesWhatItSays(t *testing.T) {
	settleAsking := func(text string, isError bool, handoff string) storage.Write {
		out := agent.ToolOutputState{Content: []ai.Block{ai.Text(text)}, ToolResultData: agent.ToolResultData{IsError: isError}}
		out.Handoff = handoff
		st, _ := json.Marshal(map[string]any{"call": map[string]string{"id": "c1"}, "output": out})
		return storage.Write{Type: storage.WriteSettle, ID: 7, Status: "done", State: st}
	}
	settle := func(text string, isError bool) storage.Write { return settleAsking(text, isError, "") }
	newContext := json.RawMessage(`{"message":"start again"}`)
	cases := []struct {
		name   string
		run    fileRun
		w      storage.Write
		broken bool
	}{
		{name: "a right read", run: fileRun{tool: "read", args: json.RawMessage(`{"path":"f","offset":2}`), before: "a\nb\n", after: "a\nb\n", existed: true, exists: true},
			w: settle("b\n", false)},
		{name: "a wrong read", run: fileRun{tool: "read", args: json.RawMessage(`{"path":"f","offset":2}`), before: "a\nb\n", after: "a\nb\n", existed: true, exists: true},
			w: settle("a\nb\n", false), broken: true},
		{name: "a failed edit that changed the file", run: fileRun{tool: "edit", args: json.RawMessage(`{"path":"f","oldText":"a","newText":"b"}`), before: "a a", after: "b a", existed: true, exists: true},
			w: settle("edited f", false), broken: true},
		{name: "a write that failed", run: fileRun{tool: "write", args: json.RawMessage(`{"path":"f","content":"x"}`), before: "", after: "x", existed: false, exists: true},
			w: settle("disk full", true), broken: true},
		{name: "a new context asking for its message", run: fileRun{tool: "new_context", args: newContext},
			w: settleAsking("the context resets after this exchange", false, "start again")},
		{name: "a new context asking for nothing", run: fileRun{tool: "new_context", args: newContext},
			w: settle("the context resets after this exchange", false), broken: true},
		{name: "a new context asking for another message", run: fileRun{tool: "new_context", args: newContext},
			w: settleAsking("the context resets after this exchange", false, "start afresh"), broken: true},
		{name: "a new context that failed", run: fileRun{tool: "new_context", args: newContext},
			w: settleAsking("no", true, "start again"), broken: true},
		{name: "overlapped", run: fileRun{tool: "read", args: json.RawMessage(`{"path":"f"}`), before: "a", after: "b", existed: true, exists: true, others: 1},
			w: settle("b", false)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			o.tools[7] = tc.run.tool
			r := tc.run
			r.path, r.returned = "f", true
			o.fileRuns[7] = &r
			holdsOrBreaks(t, o.fileSettled(tc.w, "a test", 20), ruleFiles, tc.broken)
		})
	}
}

// The shell programs of every fileSeeds-th seed call the file tools, and
// parse back; no other program does.
func TestFileCallsAreDrawnForTheirSeeds(t *testing.T) {
	drawn := 0
	for seed := uint64(1); seed <= 60; seed++ {
		p := drawProgram(seed)
		text := p.String()
		if want := p.shell && seed%fileSeeds == 0; p.fileCalls() != want {
			t.Fatalf("seed %d: file calls %v; want %v:\n%s", seed, p.fileCalls(), want, text)
		}
		if back, err := parseProgram(text); err != nil || back.String() != text {
			t.Fatalf("seed %d: the program does not parse back (%v):\n%s", seed, err, text)
		}
		if strings.Contains(text, "write:/w/") {
			drawn++
		}
	}
	if drawn == 0 {
		t.Fatal("no program in 60 seeds writes a file")
	}
}

// A read that stops before the file's last line says which lines it
// showed; one that reaches the end says nothing of its range.
func TestAReadSaysItsRange(t *testing.T) {
	for _, c := range []struct {
		before, args, want string
	}{
		{"a\nb\nc\n", `{}`, ""},
		{"a\nb\nc\n", `{"limit":2}`, "showing lines 1-2 of 3"},
		{"a\nb\nc", `{"offset":2,"limit":1}`, "showing lines 2-2 of 3"},
		{"a\nb\nc", `{"offset":2,"limit":2}`, ""},
		{"a\nb\n", `{"offset":3}`, ""},
		{"", `{"limit":1}`, ""},
	} {
		if got := readRange(&fileRun{tool: "read", before: c.before, args: json.RawMessage(c.args)}); got != c.want {
			t.Errorf("a read %s of %q says %q; want %q", c.args, c.before, got, c.want)
		}
	}
}

// repeatedEdit's recipes write a text more than once and edit that text.
func TestRepeatedEditRecipesWriteTheTextTwice(t *testing.T) {
	for _, from := range []int{0, 1, 500, 999} {
		write, edit := repeatedEdit(from)
		var w struct{ Content string }
		var e struct {
			OldText string `json:"oldText"`
		}
		if err := json.Unmarshal([]byte(fileArgs("write", "/w/notes.txt", write)), &w); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(fileArgs("edit", "/w/notes.txt", edit)), &e); err != nil {
			t.Fatal(err)
		}
		if e.OldText == "" || strings.Count(w.Content, e.OldText) < 2 {
			t.Errorf("from %d: write %d leaves %q, edit %d replaces %q", from, write, w.Content, edit, e.OldText)
		}
	}
}
