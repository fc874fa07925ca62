package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// The file tools: a shell program of every fileSeeds-th seed registers the
// built-in read, write, edit and new_context tools over the fake
// environment's files, and its model calls them on two paths with
// arguments from recipes (fileArgs): writes of a few lines of a small
// vocabulary, edits whose old text occurs there none, once or many times,
// reads of a range of lines. A program's answers name the calls
// read:PATH:RECIPE, write:PATH:RECIPE, edit:PATH:RECIPE and
// new_context:RECIPE.
//
// The file rule holds each call that its own execute settles to what its
// arguments say, judged from the file as it was just before the call ran
// and just after, by the rule's own reading of the tools:
//   - read: the file's lines from offset (1-based; 0 is 1) on, at most
//     limit of them (0: all), ending as the file does; an error for a
//     missing file or an offset past the last line plus one; the file
//     unchanged;
//   - write: the file holds the content;
//   - edit: an empty old text, or one found other than exactly once, is an
//     error and changes nothing; otherwise the file is what it was with
//     that one occurrence replaced;
//   - new_context: no error, and a handoff asked for with its message
//     (what post_tools then does with it is an-exchange-hands-off-as-its-tools-ask's).
//
// A call another write to its file overlapped (a parallel call, a child's)
// is not judged.

// ruleFiles: a file tool does what its arguments say to the files.
const ruleFiles oracleRule = "a-file-tool-does-what-it-says"

// fileTools are the built-in file tools a file program registers.
var fileTools = map[string]bool{"read": true, "write": true, "edit": true, "new_context": true}

// filePaths are the files a file program's calls name.
var filePaths = []string{"/w/notes.txt", "/w/todo.txt"}

// fileWords are what written lines and edited texts are made of: few, so
// that an edit's old text occurs none, once or many times.
var fileWords = []string{"alpha", "beta", "gamma", "alpha beta", ""}

// fileArgs is the arguments of a file call: tool on path with recipe n,
// from a generator of its own.
func fileArgs(tool, path string, n int) string {
	rng := seededRNG(uint64(n), "file "+tool)
	var raw []byte
	switch tool {
	case "read":
		raw, _ = json.Marshal(map[string]any{"path": path, "offset": []int{0, 1, 2, 4}[rng.IntN(4)], "limit": []int{0, 1, 2}[rng.IntN(3)]})
	case "write":
		lines := make([]string, rng.IntN(5))
		for i := range lines {
			lines[i] = fileWords[rng.IntN(len(fileWords))]
		}
		content := strings.Join(lines, "\n")
		if rng.IntN(2) == 0 && content != "" {
			content += "\n"
		}
		raw, _ = json.Marshal(map[string]string{"path": path, "content": content})
	case "edit":
		old := []string{"alpha", "beta\ngamma", "gamma", "delta", "", "alpha beta"}[rng.IntN(6)]
		raw, _ = json.Marshal(map[string]string{"path": path, "oldText": old, "newText": []string{"omega", "", "beta"}[rng.IntN(3)]})
	case "new_context":
		raw, _ = json.Marshal(map[string]string{"message": fmt.Sprintf("start again from note %d", n%10)})
	}
	return string(raw)
}

// fileCalls reports whether a program's answers call a file tool.
func (p *program) fileCalls() bool {
	for _, l := range p.lines {
		if l.op != "respond" || len(l.args) < 2 || l.args[0] != "calls" {
			continue
		}
		for _, name := range strings.Split(l.args[1], ",") {
			tool, _, _ := strings.Cut(name, ":")
			if fileTools[tool] {
				return true
			}
		}
	}
	return false
}

// fileRun is what the file rule saw of one run of a file call: the file
// before and after, and how many writes of other calls reached it
// meanwhile.
type fileRun struct {
	tool, path            string
	args                  json.RawMessage
	before, after         string
	existed, exists       bool
	others                int
	returned, interrupted bool
}

// fileEnv counts the writes that reach each file through the tools, and
// those of each call (its context names its task: a call id may come back
// in another answer or conversation).
type fileEnv struct {
	agent.ExecutionEnv
	e *env
}

// fileCallKey is the context key of the call a file tool runs for.
type fileCallKey struct{}

func (f fileEnv) WriteFile(ctx context.Context, path string, data []byte) error {
	err := f.ExecutionEnv.WriteFile(ctx, path, data)
	if err == nil {
		f.e.fileWrites[path]++
		if task, ok := ctx.Value(fileCallKey{}).(storage.ID); ok {
			f.e.fileWrites[fmt.Sprintf("%d\x00%s", task, path)]++
		}
	}
	return err
}

// fileTool is the built-in tool t, its runs seen by the file rule.
func (e *env) fileTool(t agent.Tool) agent.Tool {
	run := t.Execute
	t.Execute = func(ctx context.Context, call string, args json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
		var a struct {
			Path string `json:"path"`
		}
		_ = json.Unmarshal(args, &a)
		r := &fileRun{tool: t.Definition.Name, path: a.Path, args: args}
		r.before, r.existed = e.proc.Files()[a.Path]
		task := rt.TaskID()
		own := fmt.Sprintf("%d\x00%s", task, a.Path)
		w0, own0 := e.fileWrites[a.Path], e.fileWrites[own]
		err := run(context.WithValue(ctx, fileCallKey{}, task), call, args, out, rt)
		r.after, r.exists = e.proc.Files()[a.Path]
		r.others = e.fileWrites[a.Path] - w0 - (e.fileWrites[own] - own0)
		r.returned, r.interrupted = true, ctx.Err() != nil
		e.oracle.fileRuns[task] = r
		return err
	}
	return t
}

// fileSettled holds the settlement w of a file call, at seq, to the rule.
func (o *oracle) fileSettled(w storage.Write, by string, seq storage.ID) error {
	if w.Type != storage.WriteSettle || !fileTools[o.tools[w.ID]] {
		return nil
	}
	var st struct {
		Call   struct{ ID string } `json:"call"`
		Output *agent.ToolOutputState
	}
	if json.Unmarshal(w.State, &st) != nil || st.Output == nil {
		return nil
	}
	r := o.fileRuns[w.ID]
	delete(o.fileRuns, w.ID)
	if r == nil || !r.returned || r.interrupted || w.Status != "done" {
		return nil
	}
	got := outputText(st.Output)
	if r.tool == "new_context" {
		var a struct{ Message string }
		_ = json.Unmarshal(r.args, &a)
		if st.Output.IsError || st.Output.Handoff != a.Message {
			return o.fail(broke(ruleFiles, "%s: call %s of new_context %s at %d settled with error %v (%q), asking for the handoff %q; want no error and the handoff %q",
				by, st.Call.ID, r.args, seq, st.Output.IsError, got, st.Output.Handoff, a.Message))
		}
		return nil
	}
	want, wantErr, after := fileExpected(r)
	if r.others > 0 {
		return nil // another call's write overlapped it
	}
	var problem string
	switch {
	case wantErr != st.Output.IsError:
		problem = fmt.Sprintf("settled with error %v (%q); want an error %v", st.Output.IsError, got, wantErr)
	case r.tool == "read" && !wantErr && got != want:
		problem = fmt.Sprintf("read %q; want %q", got, want)
	case r.tool == "read" && !wantErr && rangeSaid(st.Output.Diags) != readRange(r):
		problem = fmt.Sprintf("said of its range %q; want %q", rangeSaid(st.Output.Diags), readRange(r))
	case r.exists != (after != nil) || after != nil && r.after != *after:
		problem = fmt.Sprintf("left the file %s; want %s", showFile(r.after, r.exists), showFile(deref(after), after != nil))
	}
	if problem == "" {
		return nil
	}
	return o.fail(broke(ruleFiles, "%s: call %s of %s %s at %d, on %s (before it: %s): %s",
		by, st.Call.ID, r.tool, r.args, seq, r.path, showFile(r.before, r.existed), problem))
}

// fileExpected is what the rule says a run of a file call does: the text a
// read shows, whether the call fails, and the file after it (nil: none).
func fileExpected(r *fileRun) (text string, fails bool, after *string) {
	var a struct {
		Content, OldText, NewText string
		Offset, Limit             int
	}
	_ = json.Unmarshal(r.args, &a)
	unchanged := func() *string {
		if !r.existed {
			return nil
		}
		s := r.before
		return &s
	}
	switch r.tool {
	case "write":
		return "", false, &a.Content
	case "edit":
		if !r.existed || a.OldText == "" || strings.Count(r.before, a.OldText) != 1 {
			return "", true, unchanged()
		}
		i := strings.Index(r.before, a.OldText)
		s := r.before[:i] + a.NewText + r.before[i+len(a.OldText):]
		return "", false, &s
	}
	if !r.existed {
		return "", true, nil
	}
	first := max(a.Offset, 1)
	var b strings.Builder
	n := 0 // lines counted so far
	for rest := r.before; rest != ""; {
		line, tail, found := strings.Cut(rest, "\n")
		if found {
			line += "\n"
		}
		rest = tail
		n++
		if n >= first && (a.Limit <= 0 || n < first+a.Limit) {
			b.WriteString(line)
		}
	}
	if first > n+1 {
		return "", true, unchanged()
	}
	return b.String(), false, unchanged()
}

// readRange is what a read that stops before the file's last line says
// of the lines it showed ("" when it shows them to the end).
func readRange(r *fileRun) string {
	var a struct{ Offset, Limit int }
	_ = json.Unmarshal(r.args, &a)
	n := strings.Count(r.before, "\n")
	if r.before != "" && !strings.HasSuffix(r.before, "\n") {
		n++
	}
	first, to := max(a.Offset, 1), n
	if a.Limit > 0 {
		to = min(n, first-1+a.Limit)
	}
	if to >= n {
		return ""
	}
	return fmt.Sprintf("showing lines %d-%d of %d", first, to, n)
}

// rangeSaid is the message of a read's range diagnostic ("" for none).
func rangeSaid(diags []agent.Diag) string {
	for _, d := range diags {
		if d.Code == "range" {
			return d.Message
		}
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// showFile describes a file's content, or its absence.
func showFile(content string, exists bool) string {
	if !exists {
		return "absent"
	}
	return strconv.Quote(content)
}

// fileSeeds is how often a drawn shell program's model calls the file
// tools: every third seed from 3, not the golden traces' seed 1.
const fileSeeds = 3

// repeatedEdit is the first pair of recipes from from, counting up (and
// around), whose write leaves a text more than once in the file and
// whose edit replaces that text.
func repeatedEdit(from int) (write, edit int) {
	var e struct {
		OldText string `json:"oldText"`
	}
	var w struct {
		Content string `json:"content"`
	}
	for i := range 1000 {
		write = (from + i) % 1000
		if json.Unmarshal([]byte(fileArgs("write", "", write)), &w) != nil {
			continue
		}
		for j := range 1000 {
			edit = (from + j) % 1000
			if json.Unmarshal([]byte(fileArgs("edit", "", edit)), &e) == nil && e.OldText != "" && strings.Count(w.Content, e.OldText) > 1 {
				return write, edit
			}
		}
	}
	panic("picosim: no file recipes write a text twice")
}

// drawFileCalls gives the model of every fileSeeds-th seed's shell
// program, from a generator of its own, two to four answers that call the
// file tools, one to three calls each, first writes then anything, and to
// half of them one more that asks for two handoffs.
func drawFileCalls(p *program, seed uint64) {
	if !p.shell || seed%fileSeeds != 0 {
		return
	}
	rng := seededRNG(seed, "file calls")
	for i := range 2 + rng.IntN(3) {
		var names []string
		for range 1 + rng.IntN(3) {
			tool := []string{"write", "read", "read", "edit", "edit", "new_context"}[rng.IntN(6)]
			if i == 0 {
				tool = "write"
			}
			path := filePaths[rng.IntN(len(filePaths))]
			if tool == "new_context" {
				names = append(names, fmt.Sprintf("new_context:%d", rng.IntN(1000)))
				continue
			}
			names = append(names, fmt.Sprintf("%s:%s:%d", tool, path, rng.IntN(1000)))
		}
		l := progLine{op: "respond", args: []string{"calls", strings.Join(names, ",")}}
		at := rng.IntN(len(p.lines)) // before the final drive
		if i == 0 {
			at = 0
		}
		p.lines = slices.Insert(p.lines, at, l)
	}
	// Half of them, from a generator of their own, begin with a turn that
	// writes a file and then edits a text it holds more than once, which
	// the edit must refuse: random recipes seldom meet so.
	if many := seededRNG(seed, "edit of many"); many.IntN(2) == 0 {
		path := filePaths[many.IntN(len(filePaths))]
		write, edit := repeatedEdit(many.IntN(1000))
		p.lines = append([]progLine{{op: "respond", args: []string{"calls", fmt.Sprintf("write:%s:%d", path, write)}},
			{op: "respond", args: []string{"calls", fmt.Sprintf("edit:%s:%d", path, edit)}}, {op: "respond", args: []string{"text", "ok"}},
			{op: "accept", args: []string{"c0", "write and edit"}}, {op: "drive", args: []string{"c0"}}}, p.lines...)
	}
	// Half of them, from a generator of its own, also have an answer ask
	// for two handoffs that differ, which fails the exchange.
	two := seededRNG(seed, "two handoffs")
	if two.IntN(2) == 0 {
		other := []string{"work:handoff", fmt.Sprintf("new_context:%d", two.IntN(1000))}[two.IntN(2)]
		l := progLine{op: "respond", args: []string{"calls", fmt.Sprintf("new_context:%d,%s", two.IntN(1000), other)}}
		p.lines = slices.Insert(p.lines, two.IntN(len(p.lines)), l)
	}
}
