package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The spill tools write more than they may keep, so that a run meets the
// output window of §9.3 (agent.OutputLimits): every call writes the chunks
// of one recipe, a short wait before each, so that an abort or a restart
// lands mid-output (every third recipe replacing what it wrote with one
// of them), and a ":fail" call fails after its last. spill-head
// keeps the beginning and is replayed after a restart; spill-tail keeps
// the end and is never replayed, so its interrupted calls settle from what
// their sink made durable. Each chunk also reports a token of usage, so
// that tools' usage rows meet the totals and the output budget. A program's answers name them as
// spill-head:RECIPE[:fail] and spill-tail:RECIPE[:fail]; a run registers
// them only when its program calls them.

// spillTools are the spill tools and the windows they keep.
var spillTools = map[string]agent.OutputLimits{
	"spill-head": {MaxBytes: 40, MaxLines: 3, Retain: "head"},
	"spill-tail": {MaxBytes: 56, MaxLines: 4, Retain: "tail"},
}

// spillReplay is each spill tool's replay policy.
var spillReplay = map[string]agent.ReplayPolicy{"spill-head": agent.ReplaySafe, "spill-tail": agent.ReplayNever}

// spillChunkWait is how long a spill call waits before each chunk.
const spillChunkWait = 20 * time.Millisecond

// spillFailure is the error a ":fail" call ends with.
const spillFailure = "the spill failed"

// spillArgs are a spill call's arguments.
type spillArgs struct {
	Recipe int  `json:"recipe"`
	Fail   bool `json:"fail"`
}

// spillChunks is recipe n's chunks: up to six pieces of text, from a
// generator of their own, with newlines anywhere, empty ones, lines longer
// than a window and runs of newlines alone. Every fourth recipe from 1
// writes newlines seldom, so that its output overflows a window's bytes
// within its lines.
func spillChunks(n int) []string {
	rng := seededRNG(uint64(n), "spill")
	newline := 6 // one character in six
	if n%4 == 1 {
		newline = 40
	}
	chunks := make([]string, 1+rng.IntN(6))
	for i := range chunks {
		var b strings.Builder
		for range rng.IntN(40) {
			switch rng.IntN(newline) {
			case 0:
				b.WriteByte('\n')
			default:
				b.WriteByte(byte('a' + rng.IntN(26)))
			}
		}
		chunks[i] = b.String()
	}
	return chunks
}

// spillReplaceRecipes is how often a recipe replaces its output midway:
// every third one, at one chunk after the first (the sink's Replace), so
// that the window and the totals start again from that chunk.
const spillReplaceRecipes = 3

// spillReplaces is the chunk of recipe n that replaces the output instead
// of adding to it, or -1; drawn from a generator of its own, so that the
// chunks stay as they are.
func spillReplaces(n int) int {
	chunks := spillChunks(n)
	if n%spillReplaceRecipes != 0 || len(chunks) < 2 {
		return -1
	}
	return 1 + seededRNG(uint64(n), "spill replace").IntN(len(chunks)-1)
}

// spillWritten is the output a run of recipe n has written after its first
// k chunks: from the last that replaced it on.
func spillWritten(n, k int) string {
	chunks := spillChunks(n)[:k]
	if r := spillReplaces(n); r >= 0 && r < k {
		chunks = chunks[r:]
	}
	return strings.Join(chunks, "")
}

// spillCaptureRecipes is how often a recipe, after its last chunk,
// captures totals measured elsewhere (the sink's Capture): every fifth.
const spillCaptureRecipes = 5

// spillCapture is what recipe n captures under limits, nil when it
// captures nothing: more than it wrote, in a spill file, and the window
// of what it wrote as shown.
func spillCapture(n int, limits agent.OutputLimits) *agent.Truncation {
	if n%spillCaptureRecipes != 0 {
		return nil
	}
	written := spillWritten(n, len(spillChunks(n)))
	kept := window(written, limits)
	return &agent.Truncation{Truncated: true, TotalLines: strings.Count(written, "\n") + 100, TotalBytes: len(written) + 4096,
		ShownLines: strings.Count(kept, "\n"), ShownBytes: len(kept), SpillPath: fmt.Sprintf("/spill/recipe-%d.txt", n)}
}

// spillImageRecipes is how often a recipe attaches images: every fourth
// from 2, one or two, each after a chunk its own generator draws (after
// that chunk's usage), so that an output carries images beside its window
// and a restart may cut one off.
const spillImageRecipes = 4

// spillImage is an image a recipe attaches after chunk after.
type spillImage struct {
	after int
	block ai.Block
}

// spillImages is recipe n's images in the order it attaches them.
func spillImages(n int) []spillImage {
	chunks := spillChunks(n)
	if n%spillImageRecipes != 2 {
		return nil
	}
	rng := seededRNG(uint64(n), "spill images")
	imgs := make([]spillImage, 1+rng.IntN(2))
	for i := range imgs {
		imgs[i] = spillImage{after: rng.IntN(len(chunks)),
			block: ai.Block{Type: ai.BlockImage, MimeType: "image/png", Data: fmt.Sprintf("iVBORw0KGgo%dx%d", n, i)}}
	}
	slices.SortStableFunc(imgs, func(a, b spillImage) int { return a.after - b.after })
	return imgs
}

// spillCalls reports whether a program's answers call a spill tool.
func (p *program) spillCalls() bool {
	for _, l := range p.lines {
		if l.op == "respond" && len(l.args) > 1 && l.args[0] == "calls" && strings.Contains(l.args[1], "spill-") {
			return true
		}
	}
	return false
}

// spillTool is the spill tool name, recording that it ran as the echo
// tools do.
func (e *env) spillTool(name string) agent.Tool {
	replay := spillReplay[name]
	return agent.Tool{
		Definition: ai.Tool{Name: name, Description: "writes a recipe's chunks", Parameters: json.RawMessage(`{"type":"object"}`)},
		Output:     spillTools[name],
		Replay:     replay,
		Execute: func(ctx context.Context, call string, raw json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			e.ran(name, call, rt.TaskID(), replay)
			var args spillArgs
			if err := json.Unmarshal(raw, &args); err != nil {
				return err
			}
			replace := spillReplaces(args.Recipe)
			for i, c := range spillChunks(args.Recipe) {
				if err := rt.Sleep(ctx, rt.Now().Add(spillChunkWait)); err != nil {
					return err
				}
				if i == replace {
					out.Replace(c)
				} else {
					out.Write(c)
				}
				out.Usage(spillChunkUsage) // a tool's usage rows count too
				for _, img := range spillImages(args.Recipe) {
					if img.after == i {
						out.Image(img.block)
					}
				}
			}
			if c := spillCapture(args.Recipe, spillTools[name]); c != nil {
				out.Capture(*c)
			}
			if args.Fail {
				return errors.New(spillFailure)
			}
			return nil
		},
	}
}

// windowLines counts lines as a window does: each newline ends one, and text
// after the last newline is one more.
func windowLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// window is what limits keep of text, by their definition rather than the
// sink's way of getting there: the longest prefix (head) or suffix (tail)
// of at most MaxBytes bytes and MaxLines lines.
func window(text string, l agent.OutputLimits) string {
	fits := func(s string) bool { return len(s) <= l.MaxBytes && windowLines(s) <= l.MaxLines }
	if l.Retain == "tail" {
		for start := 0; start < len(text); start++ {
			if fits(text[start:]) {
				return text[start:]
			}
		}
		return ""
	}
	for end := len(text); end > 0; end-- {
		if fits(text[:end]) {
			return text[:end]
		}
	}
	return ""
}

// ruleToolOutput: a tool's output keeps the window its limits name of
// what the call wrote (§9.3): the text the longest prefix or suffix within
// them, its totals those of everything the run that settled wrote, shown
// what the window kept, truncated exactly when it dropped some, and a
// truncation warning first among the diagnostics then. A call that ran to
// its end wrote all its chunks; one interrupted, aborted or refused, the
// first few, its error after them. The result entry carries the same
// totals.
const ruleToolOutput oracleRule = "tool-output-window"

// spillCall is what the oracle keeps of a spill tool's call.
type spillCall struct {
	tool string
	args spillArgs
	// restarts is how many restarts the run had made when the call was:
	// only one since, or an abort mark, may cut it short.
	restarts int
}

// spillSettled checks the settlement w of a spill call against the window
// of what it wrote (ruleToolOutput); b is w's batch, for its result entry.
// A call that ends in an error its recipe does not make (a panic, a
// write the sink refused) must have been cut short by a restart or an
// abort mark; one the budget refused never ran.
func (o *oracle) spillSettled(w storage.Write, b storage.CommitBatch, by string, seq storage.ID) error {
	call, ok := o.spills[w.ID]
	if !ok || o.notOffered(w.ID) {
		return nil // a call not offered never runs (hookrule.go)
	}
	var st struct {
		Output *agent.ToolOutputState `json:"output"`
	}
	if err := json.Unmarshal(w.State, &st); err != nil || st.Output == nil {
		return o.fail(broke(ruleToolOutput, "%s settled %s call %d at %d with no output it can read (%v)", by, call.tool, w.ID, seq, err))
	}
	out := st.Output
	got := outputText(out)
	if failBlocked(got) >= 0 {
		return nil // a failing hook blocked it, and it never ran (hookrule.go)
	}
	limits := spillTools[call.tool]
	chunks := spillChunks(call.args.Recipe)
	complete := w.Status == "done" && (!out.IsError || call.args.Fail && strings.HasSuffix(got, spillFailure))
	refused := agent.BudgetAxisOf(agent.InputResult{Reason: got}) != "" // the budget's refusal: it never ran
	if w.Status == "done" && !complete && !refused && o.restarts == call.restarts && !o.marked[w.ID] {
		return o.fail(broke(ruleToolOutput, "%s settled %s call %d (%+v) at %d as an error, %q, though no restart or abort cut it short",
			by, call.tool, w.ID, call.args, seq, got))
	}
	var whyNot []string
	for k := len(chunks); k >= 0; k-- {
		if complete && k < len(chunks) {
			break
		}
		written := spillWritten(call.args.Recipe, k)
		kept := window(written, limits)
		// A run that wrote every chunk captured its totals after them,
		// unless a restart ended it first.
		wants := []agent.Truncation{totalsOf(written, kept)}
		if c := spillCapture(call.args.Recipe, limits); c != nil && k == len(chunks) {
			wants = append(wants[:0:0], *c)
			if !complete {
				wants = append(wants, totalsOf(written, kept))
			}
		}
		for _, want := range wants {
			why := spillMismatch(want, kept, got, out)
			if why == "" {
				why = spillUsageMismatch(out.Usage, k, complete)
			}
			if why == "" {
				why = spillImagesMismatch(out.Content, got, call.args.Recipe, k, complete)
			}
			if why == "" {
				return o.spillEntry(w, b, by, seq, call, out)
			}
			whyNot = append(whyNot, fmt.Sprintf("after %d of %d chunks: %s", k, len(chunks), why))
		}
	}
	return o.fail(broke(ruleToolOutput, "%s settled %s call %d (%s, %+v) at %d with text %q and truncation %+v; no run of it writes that: %s",
		by, call.tool, w.ID, w.Status, call.args, seq, got, out.Truncation, strings.Join(whyNot, "; ")))
}

// spillChunkUsage is the usage a spill call reports with each chunk.
var spillChunkUsage = ai.Usage{Input: 1, Output: 1, TotalTokens: 2}

// spillUsageMismatch says how usage differs from that of a run that wrote k
// chunks ("" when it does not): each chunk's usage comes after it, so a run
// a restart ended may have written a chunk without its usage.
func spillUsageMismatch(usage *ai.Usage, k int, complete bool) string {
	n := 0
	if usage != nil {
		n = int(usage.Output)
		if *usage != (ai.Usage{Input: usage.Output, Output: usage.Output, TotalTokens: 2 * usage.Output}) || n == 0 {
			return fmt.Sprintf("usage %+v, not a whole number of chunks' %+v", *usage, spillChunkUsage)
		}
	}
	if n == k || !complete && n == k-1 {
		return ""
	}
	return fmt.Sprintf("usage of %d chunks, not %d", n, k)
}

// spillImagesMismatch says how an output's content differs from that of a
// run of recipe n that wrote k chunks ("" when it does not): its text
// first, left out only when empty and there are images, then the images
// attached after the chunks written, whatever the window kept or a
// replace dropped (images are never windowed); a run a restart ended may
// have written its last chunk without the images after it, or with only
// some.
func spillImagesMismatch(content []ai.Block, text string, n, k int, complete bool) string {
	var imgs []ai.Block
	for _, b := range content {
		if b.Type == ai.BlockImage {
			imgs = append(imgs, b)
		}
	}
	want := len(imgs)
	if text != "" || len(imgs) == 0 {
		want++ // the text block
	}
	if len(content) != want || want > len(imgs) && content[0].Type != ai.BlockText {
		return fmt.Sprintf("its text, then its images (content %s)", blockTypes(content))
	}
	all := spillImages(n)
	least, most := 0, 0
	for _, img := range all {
		if img.after < k-1 || complete && img.after < k {
			least++
		}
		if img.after < k {
			most++
		}
	}
	for m := least; m <= most; m++ {
		if len(imgs) == m && slices.EqualFunc(imgs, all[:m], func(a ai.Block, b spillImage) bool { return reflect.DeepEqual(a, b.block) }) {
			return ""
		}
	}
	return fmt.Sprintf("%d to %d of its %d images, in order (it has %d)", least, most, len(all), len(imgs))
}

// blockTypes names the types of a content's blocks.
func blockTypes(content []ai.Block) string {
	types := make([]string, len(content))
	for i, b := range content {
		types[i] = string(b.Type)
	}
	return "[" + strings.Join(types, " ") + "]"
}

// totalsOf is the truncation of an output that wrote written and kept
// kept, as the sink counts it.
func totalsOf(written, kept string) agent.Truncation {
	return agent.Truncation{Truncated: len(kept) < len(written), TotalLines: strings.Count(written, "\n"), TotalBytes: len(written),
		ShownLines: strings.Count(kept, "\n"), ShownBytes: len(kept)}
}

// spillMismatch says how an output differs from one with truncation want
// that kept kept, its error text, if any, after it ("" when it does not).
func spillMismatch(want agent.Truncation, kept, got string, out *agent.ToolOutputState) string {
	t := out.Truncation
	switch {
	case t != want:
		return fmt.Sprintf("truncation %+v", want)
	case !out.IsError && got != kept:
		return fmt.Sprintf("text %q", kept)
	case out.IsError && !strings.HasPrefix(got, kept):
		return fmt.Sprintf("text %q before the error", kept)
	case out.IsError && kept != "" && !strings.HasSuffix(kept, "\n") && !strings.HasPrefix(got[len(kept):], "\n"):
		return "the error on a line of its own"
	case t.Truncated != (len(out.Diags) > 0 && out.Diags[0].Code == "truncated" && out.Diags[0].Severity == "warn"):
		return fmt.Sprintf("a truncation warning first among the diagnostics exactly when truncated (diagnostics %+v)", out.Diags)
	}
	return ""
}

// spillEntry checks that the settlement's batch has the call's result entry
// with the output's totals.
func (o *oracle) spillEntry(w storage.Write, b storage.CommitBatch, by string, seq storage.ID, call spillCall, out *agent.ToolOutputState) error {
	for _, e := range b.Writes {
		if e.Type != storage.WriteEntry || e.Entry == nil || e.Entry.ByTaskID != w.ID || e.Entry.Kind != "tool_result" {
			continue
		}
		var data agent.ToolResultData
		if err := json.Unmarshal(e.Entry.Data, &data); err != nil || data.Truncation != out.Truncation || data.IsError != out.IsError {
			return o.fail(broke(ruleToolOutput, "%s settled %s call %d at %d with truncation %+v; its result entry %d says %s", by, call.tool, w.ID, seq, out.Truncation, e.Entry.ID, e.Entry.Data))
		}
		// The model reads the output's images too, after its text.
		var want, got []ai.Block
		for _, b := range out.Content {
			if b.Type == ai.BlockImage {
				want = append(want, b)
			}
		}
		for _, m := range e.Entry.Model {
			for _, b := range m.Content.Blocks {
				if b.Type == ai.BlockImage {
					got = append(got, b)
				}
			}
		}
		if !sameOrEmpty(got, want) {
			return o.fail(broke(ruleToolOutput, "%s settled %s call %d at %d with %d images; its result entry %d shows the model %d", by, call.tool, w.ID, seq, len(want), e.Entry.ID, len(got)))
		}
		return nil
	}
	return o.fail(broke(ruleToolOutput, "%s settled %s call %d at %d without its result entry", by, call.tool, w.ID, seq))
}
