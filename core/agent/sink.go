package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// OutputLimits bound the text a tool's output retains (§9.3). The sink
// enforces them, counts what it dropped and says so in a diagnostic.
type OutputLimits struct {
	MaxBytes int `json:"maxBytes,omitempty"`
	MaxLines int `json:"maxLines,omitempty"`
	// Retain is "head" (keep the beginning) or "tail" (keep the end).
	Retain string `json:"retain,omitempty"`
}

// Default output limits, for tools that declare none.
const (
	outputBytesMaxDefault = 50_000
	outputLinesMaxDefault = 2_000
)

func (l OutputLimits) withDefaults() OutputLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = outputBytesMaxDefault
	}
	if l.MaxLines <= 0 {
		l.MaxLines = outputLinesMaxDefault
	}
	if l.Retain != "tail" {
		l.Retain = "head"
	}
	return l
}

// Truncation is what the output retained of everything written.
type Truncation struct {
	Truncated  bool   `json:"truncated"`
	TotalLines int    `json:"totalLines"`
	TotalBytes int    `json:"totalBytes"`
	ShownLines int    `json:"shownLines"`
	ShownBytes int    `json:"shownBytes"`
	SpillPath  string `json:"spillPath,omitempty"`
}

// Diag is commentary about a call, kept out of its data.
type Diag struct {
	Severity string `json:"severity"` // info, warn or error
	Message  string `json:"message"`
	Code     string `json:"code,omitempty"`
}

// ToolOutputState is what a tool's sink folds to: stored on the tool task,
// used to build its result entry, and the tool's preview. Its JSON is the
// content followed by the ToolResultData fields.
type ToolOutputState struct {
	Content []ai.Block `json:"content"`
	ToolResultData
}

// text is the state's text content, the first text block.
func (s *ToolOutputState) text() string {
	for _, b := range s.Content {
		if b.Type == ai.BlockText {
			return b.Text
		}
	}
	return ""
}

// ToolResultData is a tool result entry's data: the output state without
// the content, which the entry's model message carries.
type ToolResultData struct {
	Details    json.RawMessage `json:"details,omitempty"`
	Usage      *ai.Usage       `json:"usage,omitempty"`
	AddedTools []string        `json:"addedTools,omitempty"`
	Terminate  bool            `json:"terminate"`
	Handoff    string          `json:"handoff,omitempty"`
	Delegated  storage.ID      `json:"delegated,omitempty"`
	Diags      []Diag          `json:"diags"`
	Truncation Truncation      `json:"truncation"`
	IsError    bool            `json:"isError"`
}

// SinkOp is one sink call as it is stored in the tool's scratch, so that a
// replayed or interrupted tool recovers its output from durable state.
type SinkOp struct {
	Op         string      `json:"op"` // write, replace, image, capture, usage, addTools, terminate, handoff, delegate, diag
	Text       string      `json:"text,omitempty"`
	Image      *ai.Block   `json:"image,omitempty"`
	Truncation *Truncation `json:"truncation,omitempty"`
	Usage      *ai.Usage   `json:"usage,omitempty"`
	Names      []string    `json:"names,omitempty"`
	Value      bool        `json:"value,omitempty"`
	Job        storage.ID  `json:"job,omitempty"`
	Diag       *Diag       `json:"diag,omitempty"`
}

// sinkOpsList is where a tool's sink writes its operations.
var sinkOpsList = storage.ScratchList[SinkOp]("pi.tool.output")

// outputFold folds sink operations into an output state. It keeps the
// retained text window and totals over everything written.
type outputFold struct {
	limits  OutputLimits
	text    strings.Builder
	lines   int // newlines in text
	trunc   Truncation
	images  []ai.Block
	state   ToolOutputState
	capture *Truncation
}

func newOutputFold(l OutputLimits) *outputFold {
	return &outputFold{limits: l.withDefaults()}
}

func (f *outputFold) apply(op SinkOp) {
	switch op.Op {
	case "write":
		f.write(op.Text)
	case "replace":
		f.text.Reset()
		f.lines = 0
		if !plant.On("sink-replace-keeps-totals") {
			f.trunc = Truncation{}
		}
		f.write(op.Text)
	case "image":
		if op.Image != nil {
			f.images = append(f.images, *op.Image)
		}
	case "capture":
		f.capture = op.Truncation
	case "usage":
		if op.Usage != nil && !(plant.On("sink-usage-keeps-first") && f.state.Usage != nil) {
			u := *op.Usage
			if f.state.Usage != nil && !plant.On("sink-usage-keeps-last") {
				u = f.state.Usage.Add(u)
			}
			f.state.Usage = &u
		}
	case "addTools":
		f.state.AddedTools = append([]string(nil), op.Names...)
	case "terminate":
		f.state.Terminate = op.Value
	case "handoff":
		f.state.Handoff = op.Text
	case "delegate":
		f.state.Delegated = op.Job
	case "diag":
		if op.Diag != nil {
			f.state.Diags = append(f.state.Diags, *op.Diag)
		}
	}
}

// write adds text to the window: a head window stops taking text at its
// limits, a tail window drops its oldest lines to make room.
func (f *outputFold) write(s string) {
	f.trunc.TotalBytes += len(s)
	f.trunc.TotalLines += strings.Count(s, "\n")
	if f.limits.Retain == "head" {
		room := f.limits.MaxBytes - f.text.Len()
		for room > 0 && s != "" && f.lines < f.limits.MaxLines {
			line, rest, nl := strings.Cut(s, "\n")
			if nl {
				line += "\n"
			}
			if len(line) > room {
				line = line[:room]
			}
			f.text.WriteString(line)
			room -= len(line)
			if strings.HasSuffix(line, "\n") {
				f.lines++
			}
			s = rest
			if !nl {
				break
			}
		}
		return
	}
	cur := f.text.String() + s
	// Drop the oldest lines past the limit in one cut: past the limit
	// there are at least two lines, so each one dropped ends in a newline.
	cut, keep := 0, f.limits.MaxLines
	if plant.On("sink-tail-line-too-many") {
		keep++
	}
	for extra := lineCount(cur) - keep; extra > 0; extra-- {
		cut += strings.IndexByte(cur[cut:], '\n') + 1
	}
	cur = cur[cut:]
	if len(cur) > f.limits.MaxBytes {
		cur = cur[len(cur)-f.limits.MaxBytes:]
	}
	f.text.Reset()
	f.text.WriteString(cur)
	f.lines = strings.Count(cur, "\n")
}

// lineCount counts lines as the head window does: every newline ends one,
// and text after the last newline is one more.
func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// result finishes the state: the text and images as content, truncation
// totals, and the sink's own truncation diagnostic.
func (f *outputFold) result(details any, failure error) ToolOutputState {
	st := f.state
	st.Diags = append([]Diag(nil), st.Diags...)
	text := f.text.String()
	t := f.trunc
	t.ShownBytes, t.ShownLines = len(text), f.lines
	t.Truncated = t.ShownBytes < t.TotalBytes
	if plant.On("sink-truncated-by-lines-only") {
		t.Truncated = t.ShownLines < t.TotalLines
	}
	if f.capture != nil && !(plant.On("sink-capture-only-when-truncated") && !t.Truncated) {
		// Measured where the output was produced: the totals of all of it.
		t = *f.capture
	}
	if t.Truncated {
		msg := fmt.Sprintf("output truncated: %d of %d lines (%d of %d bytes) shown, %s kept", t.ShownLines, t.TotalLines, t.ShownBytes, t.TotalBytes, f.limits.Retain)
		if t.SpillPath != "" {
			msg += "; full output at " + t.SpillPath
		}
		st.Diags = append([]Diag{{Severity: "warn", Code: "truncated", Message: msg}}, st.Diags...)
	}
	st.Truncation = t
	if failure != nil {
		st.IsError = true
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += failure.Error()
	}
	if text != "" || len(f.images) == 0 {
		st.Content = append(st.Content, ai.Text(text))
	}
	st.Content = append(st.Content, f.images...)
	if details != nil {
		if raw, err := json.Marshal(details); err == nil && string(raw) != "null" && string(raw) != "{}" {
			st.Details = raw
		}
	}
	if st.Diags == nil {
		st.Diags = []Diag{}
	}
	return st
}

// toolResultMessage renders the result the model reads: the data first,
// then the diagnostics in a <harness> block.
func toolResultMessage(call ai.Block, st ToolOutputState, ts int64) ai.Message {
	content := make([]ai.Block, len(st.Content))
	copy(content, st.Content)
	if plant.On("tool-result-drops-images") {
		content = slices.DeleteFunc(content, func(b ai.Block) bool { return b.Type == ai.BlockImage })
	}
	if len(st.Diags) > 0 {
		var b strings.Builder
		b.WriteString("<harness>\n")
		for _, d := range st.Diags {
			fmt.Fprintf(&b, "[%s] %s\n", d.Severity, d.Message)
		}
		b.WriteString("</harness>")
		if len(content) > 0 && content[0].Type == ai.BlockText {
			text := content[0].Text
			if text != "" && !strings.HasSuffix(text, "\n") {
				text += "\n"
			}
			content[0] = ai.Text(text + b.String())
		} else {
			content = append([]ai.Block{ai.Text(b.String())}, content...)
		}
	}
	return ai.Message{Role: ai.RoleToolResult, ToolCallID: call.ID, ToolName: call.Name,
		Content: ai.Blocks(content...), IsError: ai.Bool(st.IsError), Timestamp: ts}
}

// ToolOutput is the sink everything a tool produces goes through (§9.3).
// Each call is one durable scratch write through the invocation's progress
// bridge; after the invocation loses its authority calls are dropped.
// Details is the tool's own object for UIs: set or mutate it; it is
// recorded when the call settles.
type ToolOutput struct {
	fold     *outputFold
	progress *core.Progress
	preview  *delta.Tracker
	watched  func() bool // TaskRuntime.PreviewWatched; nil: always
	Details  map[string]any
}

func (o *ToolOutput) emit(op SinkOp) {
	o.fold.apply(op)
	o.trackPreview()
	if o.progress != nil {
		o.progress.Write(func(sc core.ScratchTx) error {
			sc.Append(sinkOpsList.Address, op)
			return nil
		})
	}
}

// trackPreview brings the preview, the output state so far, up to date.
// Each top-level field is set in key order; the tracker's flush turns an
// appended text into one a op and a sliding tail into t and a. While
// nothing watches the preview it is left alone: the harness rebuilds it
// from the durable sink operations when something does.
func (o *ToolOutput) trackPreview() {
	if o.preview == nil || o.watched != nil && !o.watched() {
		return
	}
	v, err := delta.ValueOf(o.fold.result(nil, nil))
	if err != nil {
		return
	}
	m, _ := v.(map[string]any)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := o.preview.Set(delta.Path{k}, m[k]); err != nil {
			// The base was not an object (a preview built before the tool
			// ran): start it over from this state.
			_ = o.preview.Replace(v)
			return
		}
	}
}

// Write appends text to the output the model reads.
func (o *ToolOutput) Write(text string) { o.emit(SinkOp{Op: "write", Text: text}) }

// Replace replaces the retained text wholesale.
func (o *ToolOutput) Replace(text string) { o.emit(SinkOp{Op: "replace", Text: text}) }

// Image adds an image; images are never windowed.
func (o *ToolOutput) Image(img ai.Block) { o.emit(SinkOp{Op: "image", Image: &img}) }

// Capture records truncation totals or a spill path measured elsewhere.
func (o *ToolOutput) Capture(t Truncation) { o.emit(SinkOp{Op: "capture", Truncation: &t}) }

// Usage accumulates model usage the tool caused.
func (o *ToolOutput) Usage(u ai.Usage) { o.emit(SinkOp{Op: "usage", Usage: &u}) }

// AddTools asks for these tools from the next turn on (replacing earlier
// calls); post_tools adds them to the selected tools.
func (o *ToolOutput) AddTools(names []string) { o.emit(SinkOp{Op: "addTools", Names: names}) }

// Terminate stops the turn after this exchange, however the call ends.
func (o *ToolOutput) Terminate(v bool) { o.emit(SinkOp{Op: "terminate", Value: v}) }

// Handoff asks for a context reset with message after the exchange.
func (o *ToolOutput) Handoff(message string) { o.emit(SinkOp{Op: "handoff", Text: message}) }

// Delegate says this call's work continues as job.
func (o *ToolOutput) Delegate(job storage.ID) { o.emit(SinkOp{Op: "delegate", Job: job}) }

// Diag adds commentary about the call.
func (o *ToolOutput) Diag(severity, message, code string) {
	o.emit(SinkOp{Op: "diag", Diag: &Diag{Severity: severity, Message: message, Code: code}})
}
