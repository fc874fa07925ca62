package main

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// A window is the longest prefix or suffix within both limits, a partial
// last line counting as a line.
func TestWindowKeepsTheLongestEndWithinItsLimits(t *testing.T) {
	head := agent.OutputLimits{MaxBytes: 8, MaxLines: 2, Retain: "head"}
	tail := agent.OutputLimits{MaxBytes: 8, MaxLines: 2, Retain: "tail"}
	for _, c := range []struct {
		text       string
		head, tail string
	}{
		{"", "", ""},
		{"abc", "abc", "abc"},
		{"a\nb\nc\n", "a\nb\n", "b\nc\n"},
		{"a\nb\nc", "a\nb\n", "b\nc"},
		{"abcdefghij", "abcdefgh", "cdefghij"},
		{"ab\ncdefghij", "ab\ncdefg", "cdefghij"},
		{"\n\n\n", "\n\n", "\n\n"},
		{"abcdef\n\n", "abcdef\n\n", "abcdef\n\n"},
		{"x\nabcdefghij\n", "x\nabcdef", "cdefghij\n"[1:]},
	} {
		if got := window(c.text, head); got != c.head {
			t.Errorf("head window of %q = %q; want %q", c.text, got, c.head)
		}
		if got := window(c.text, tail); got != c.tail {
			t.Errorf("tail window of %q = %q; want %q", c.text, got, c.tail)
		}
	}
}

// spillSettlement is a spill call's settlement as the sink makes it of a
// run that wrote written, in chunks (each with its usage), with its result
// entry.
func spillSettlement(tool, written string, chunks int, failure string) (storage.Write, storage.CommitBatch) {
	return spillCaptured(tool, written, chunks, failure, nil)
}

// spillCaptured is spillSettlement of a run that captured totals (nil: none).
func spillCaptured(tool, written string, chunks int, failure string, capture *agent.Truncation) (storage.Write, storage.CommitBatch) {
	kept := window(written, spillTools[tool])
	out := agent.ToolOutputState{ToolResultData: agent.ToolResultData{Diags: []agent.Diag{}, Truncation: totalsOf(written, kept)}}
	if capture != nil {
		out.Truncation = *capture
	}
	if chunks > 0 {
		u := ai.Usage{Input: int64(chunks), Output: int64(chunks), TotalTokens: 2 * int64(chunks)}
		out.Usage = &u
	}
	if out.Truncation.Truncated {
		out.Diags = []agent.Diag{{Severity: "warn", Code: "truncated", Message: "output truncated"}}
	}
	text := kept
	if failure != "" {
		out.IsError = true
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += failure
	}
	out.Content = []ai.Block{ai.Text(text)}
	state, _ := json.Marshal(map[string]any{"output": out, "result": 9})
	data, _ := json.Marshal(out.ToolResultData)
	w := storage.Write{Type: storage.WriteSettle, ID: 8, Status: "done", Role: storage.RoleTerminal, State: state}
	entry := storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 9, ConversationID: 1, Kind: "tool_result", ByTaskID: 8, Data: data}}
	return w, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{entry, w}}
}

// The rule takes what a run of the call writes, whole or, for a call that
// did not finish, its first chunks; it breaks at anything else.
func TestTheToolOutputRuleTakesOnlyWhatARunWrites(t *testing.T) {
	recipe := 0
	for n := 1; recipe == 0; n++ {
		if c := spillChunks(n); len(c) >= 3 && len(strings.Join(c, "")) > 80 && strings.Count(strings.Join(c, ""), "\n") > 6 {
			recipe = n
		}
	}
	chunks := spillChunks(recipe)
	all := spillWritten(recipe, len(chunks))
	check := func(tool string, args spillArgs, w storage.Write, b storage.CommitBatch) error {
		o := newOracle()
		o.spills[8] = spillCall{tool: tool, args: args}
		o.restarts = 1 // since the call was made: what may interrupt it
		return o.spillSettled(w, b, "task 8's execute", 10)
	}
	for _, tool := range []string{"spill-head", "spill-tail"} {
		w, b := spillSettlement(tool, all, len(chunks), "")
		if err := check(tool, spillArgs{Recipe: recipe}, w, b); err != nil {
			t.Fatalf("%s, whole: %v", tool, err)
		}
		w, b = spillSettlement(tool, all, len(chunks), spillFailure)
		if err := check(tool, spillArgs{Recipe: recipe, Fail: true}, w, b); err != nil {
			t.Fatalf("%s, failed at its end: %v", tool, err)
		}
		w, b = spillSettlement(tool, spillWritten(recipe, 2), 2, "interrupted")
		if err := check(tool, spillArgs{Recipe: recipe}, w, b); err != nil {
			t.Fatalf("%s, interrupted after two chunks: %v", tool, err)
		}
		w, b = spillSettlement(tool, spillWritten(recipe, 2), 1, "interrupted")
		if err := check(tool, spillArgs{Recipe: recipe}, w, b); err != nil {
			t.Fatalf("%s, interrupted after two chunks and the first's usage: %v", tool, err)
		}
		broken := map[string]func() (storage.Write, storage.CommitBatch){
			"a finished call with only its first chunks": func() (storage.Write, storage.CommitBatch) {
				return spillSettlement(tool, spillWritten(recipe, 2), 2, "")
			},
			"the other end's window": func() (storage.Write, storage.CommitBatch) {
				other := map[string]string{"spill-head": "spill-tail", "spill-tail": "spill-head"}[tool]
				return spillSettlement(other, all, len(chunks), "")
			},
			"a window a line longer": func() (storage.Write, storage.CommitBatch) {
				l := spillTools[tool]
				l.MaxLines++
				saved := spillTools[tool]
				spillTools[tool] = l
				defer func() { spillTools[tool] = saved }()
				return spillSettlement(tool, all, len(chunks), "")
			},
			"no truncation warning": func() (storage.Write, storage.CommitBatch) {
				w, b := spillSettlement(tool, all, len(chunks), "")
				w.State = json.RawMessage(strings.Replace(string(w.State), `"code":"truncated"`, `"code":"other"`, 1))
				return w, b
			},
			"a result entry with other totals": func() (storage.Write, storage.CommitBatch) {
				w, b := spillSettlement(tool, all, len(chunks), "")
				b.Writes[0].Entry.Data = json.RawMessage(strings.Replace(string(b.Writes[0].Entry.Data), `"totalBytes":`, `"totalBytes":1`, 1))
				return w, b
			},
			"a finished call with a chunk's usage missing": func() (storage.Write, storage.CommitBatch) {
				return spillSettlement(tool, all, len(chunks)-1, "")
			},
			"an interrupted call with a chunk's usage too many": func() (storage.Write, storage.CommitBatch) {
				return spillSettlement(tool, spillWritten(recipe, 2), 3, "interrupted")
			},
			"no result entry": func() (storage.Write, storage.CommitBatch) {
				w, b := spillSettlement(tool, all, len(chunks), "")
				b.Writes = b.Writes[1:]
				return w, b
			},
		}
		for name, build := range broken {
			w, b := build()
			var oe *oracleError
			if err := check(tool, spillArgs{Recipe: recipe}, w, b); !errors.As(err, &oe) || oe.Rule != ruleToolOutput {
				t.Errorf("%s, %s: %v; want a %s violation", tool, name, err, ruleToolOutput)
			}
		}
		// Cut short with no restart since it was made, nor an abort mark:
		// an error nothing explains.
		o := newOracle()
		o.spills[8] = spillCall{tool: tool, args: spillArgs{Recipe: recipe}}
		w, b = spillSettlement(tool, spillWritten(recipe, 2), 2, "panicked")
		var oe *oracleError
		if err := o.spillSettled(w, b, "task 8's execute", 10); !errors.As(err, &oe) || oe.Rule != ruleToolOutput {
			t.Errorf("%s, an error nothing explains: %v; want a %s violation", tool, err, ruleToolOutput)
		}
		o.marked[8] = true
		if err := o.spillSettled(w, b, "task 8's execute", 10); err != nil {
			t.Errorf("%s, cut short by an abort mark: %v", tool, err)
		}
	}
}

// Programs that call the spill tools run on every backend, replay, and
// keep their windows: a long output truncated at either end, a short one
// whole, and a failure after its output.
func TestSpillProgramsKeepTheirWindows(t *testing.T) {
	long, short := 0, 0
	for n := 1; long == 0 || short == 0; n++ {
		switch all := spillWritten(n, len(spillChunks(n))); {
		case long == 0 && len(all) > 100 && strings.Count(all, "\n") > 6:
			long = n
		case short == 0 && all != "" && len(all) < 30 && strings.Count(all, "\n") < 3:
			short = n
		}
	}
	p, err := parseProgram(programMagic + `
swarm tail=2 shell=false
respond calls spill-head:` + strconv.Itoa(long) + `,spill-tail:` + strconv.Itoa(long) + `
respond calls spill-head:` + strconv.Itoa(short) + `:fail
respond text "done"
accept c0 "go"
drive c0
`)
	if err != nil {
		t.Fatal(err)
	}
	if !p.spillCalls() {
		t.Fatal("the program calls no spill tool")
	}
	for backend, trace := range runOnEveryBackend(t, p, 3) {
		if n := strings.Count(trace, `"truncated":true`); n < 2 {
			t.Errorf("%s: %d truncated outputs in the trace; want both long calls'", backend, n)
		}
		if !strings.Contains(trace, spillFailure) {
			t.Errorf("%s: the failing call's error is not in the trace", backend)
		}
	}
}

// Every third recipe replaces its output at one chunk: the window and the
// totals start again there, and an output that kept what came before
// breaks the rule.
func TestASpillRecipeStartsAgainAtItsReplace(t *testing.T) {
	recipe := 0
	for n := 1; recipe == 0; n++ {
		if r := spillReplaces(n); r > 0 && strings.Join(spillChunks(n)[:r], "") != "" && len(spillImages(n)) == 0 {
			recipe = n
		}
	}
	if recipe%spillReplaceRecipes != 0 {
		t.Fatalf("recipe %d replaces; only every %dth does", recipe, spillReplaceRecipes)
	}
	chunks := spillChunks(recipe)
	r := spillReplaces(recipe)
	if got, want := spillWritten(recipe, len(chunks)), strings.Join(chunks[r:], ""); got != want {
		t.Fatalf("recipe %d written whole = %q; want the chunks from %d on, %q", recipe, got, r, want)
	}
	if got, want := spillWritten(recipe, r), strings.Join(chunks[:r], ""); got != want {
		t.Fatalf("recipe %d written before its replace = %q; want %q", recipe, got, want)
	}
	for _, tool := range []string{"spill-head", "spill-tail"} {
		o := newOracle()
		o.spills[8] = spillCall{tool: tool, args: spillArgs{Recipe: recipe}}
		w, b := spillSettlement(tool, spillWritten(recipe, len(chunks)), len(chunks), "")
		if err := o.spillSettled(w, b, "task 8's execute", 10); err != nil {
			t.Fatalf("%s, whole: %v", tool, err)
		}
		o = newOracle()
		o.spills[8] = spillCall{tool: tool, args: spillArgs{Recipe: recipe}}
		w, b = spillSettlement(tool, strings.Join(chunks, ""), len(chunks), "")
		var oe *oracleError
		if err := o.spillSettled(w, b, "task 8's execute", 10); !errors.As(err, &oe) || oe.Rule != ruleToolOutput {
			t.Errorf("%s, what came before the replace kept: %v; want a %s violation", tool, err, ruleToolOutput)
		}
	}
}

// Every fifth recipe captures its totals after its last chunk: a finished
// call's output carries them; one a restart ended after the last chunk may
// carry them or not.
func TestASpillRecipeCapturesItsTotals(t *testing.T) {
	recipe := spillCaptureRecipes
	chunks := spillChunks(recipe)
	written := spillWritten(recipe, len(chunks))
	for _, tool := range []string{"spill-head", "spill-tail"} {
		capture := spillCapture(recipe, spillTools[tool])
		if capture == nil || capture.TotalBytes <= len(written) || capture.SpillPath == "" {
			t.Fatalf("recipe %d captures %+v; want more than it wrote, in a spill file", recipe, capture)
		}
		for _, c := range []struct {
			name    string
			capture *agent.Truncation
			failure string
			broken  bool
		}{
			{name: "finished, captured", capture: capture},
			{name: "finished, not captured", broken: true},
			{name: "interrupted after its chunks, captured", capture: capture, failure: "interrupted"},
			{name: "interrupted after its chunks, not captured", failure: "interrupted"},
		} {
			o := newOracle()
			o.spills[8] = spillCall{tool: tool, args: spillArgs{Recipe: recipe}}
			o.restarts = 1 // an interrupted call's restart
			w, b := spillCaptured(tool, written, len(chunks), c.failure, c.capture)
			err := o.spillSettled(w, b, "task 8's execute", 10)
			var oe *oracleError
			switch {
			case c.broken && (!errors.As(err, &oe) || oe.Rule != ruleToolOutput):
				t.Errorf("%s, %s: %v; want a %s violation", tool, c.name, err, ruleToolOutput)
			case !c.broken && err != nil:
				t.Errorf("%s, %s: %v", tool, c.name, err)
			}
		}
	}
	if spillCapture(recipe+1, spillTools["spill-head"]) != nil {
		t.Errorf("recipe %d captures; only every %dth does", recipe+1, spillCaptureRecipes)
	}
}

// An output's images are all those attached after the chunks written (a run
// a restart ended may lack its last chunk's), after its text, which is left
// out only when empty.
func TestTheToolOutputRuleHoldsImagesBesideTheWindow(t *testing.T) {
	n := -1
	for r := 2; n < 0; r += spillImageRecipes {
		if imgs := spillImages(r); len(imgs) == 2 && imgs[0].after < imgs[1].after && imgs[0].after > 0 {
			n = r
		}
	}
	imgs, chunks := spillImages(n), len(spillChunks(n))
	if len(spillImages(n+1)) != 0 {
		t.Fatalf("recipe %d attaches images; only every %dth from 2 does", n+1, spillImageRecipes)
	}
	text := ai.Text("kept")
	first, second := imgs[0].block, imgs[1].block
	for _, tc := range []struct {
		name     string
		content  []ai.Block
		text     string
		k        int
		complete bool
		broken   bool
	}{
		{"every image after the text", []ai.Block{text, first, second}, "kept", chunks, true, false},
		{"no text block when it is empty", []ai.Block{first, second}, "", chunks, true, false},
		{"an empty text block before the images", []ai.Block{ai.Text(""), first, second}, "", chunks, true, true},
		{"an image missing from a whole run", []ai.Block{text, first}, "kept", chunks, true, true},
		{"the images out of order", []ai.Block{text, second, first}, "kept", chunks, true, true},
		{"an image before the text", []ai.Block{first, text, second}, "kept", chunks, true, true},
		{"a run cut before the first image's chunk", []ai.Block{text}, "kept", imgs[0].after, false, false},
		{"a run cut after the first image's chunk, without it", []ai.Block{text}, "kept", imgs[0].after + 1, false, false},
		{"a run cut after the first image's chunk, with it", []ai.Block{text, first}, "kept", imgs[0].after + 1, false, false},
		{"a run cut later, without the first", []ai.Block{text}, "kept", imgs[0].after + 2, false, true},
		{"an image of a chunk not written", []ai.Block{text, first}, "kept", imgs[0].after, false, true},
	} {
		got := spillImagesMismatch(tc.content, tc.text, n, tc.k, tc.complete)
		if (got != "") != tc.broken {
			t.Errorf("%s: %q; want a mismatch %v", tc.name, got, tc.broken)
		}
	}
}
