package agent

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The views of a tool's state read the same output and limits as the whole
// ToolState does: their fields are named as its fields are.
func TestToolStateViewsReadWhatTheStateHolds(t *testing.T) {
	st := ToolState{
		Call:      ai.Block{Type: ai.BlockToolCall, ID: "c1", Name: "read", Arguments: json.RawMessage(`{"path":"a"}`)},
		Assistant: 3, Offered: true, BudgetMs: 9, Args: json.RawMessage(`{"path":"a"}`),
		Limits: OutputLimits{MaxBytes: 10, MaxLines: 2, Retain: "tail"},
		Output: &ToolOutputState{Content: []ai.Block{{Type: ai.BlockText, Text: "out"}}, ToolResultData: ToolResultData{
			AddedTools: []string{"grep", "ls"}, Terminate: true, Handoff: "reset to this"}},
		Result: 7,
	}
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	task := &storage.Task{ID: 5, Kind: ToolKindName, State: raw}
	whole, err := decodeState[ToolState](task)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeState[toolOutcomeView](task)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := decodeState[toolLimitsView](task)
	if err != nil {
		t.Fatal(err)
	}
	want := &toolOutcome{AddedTools: whole.Output.AddedTools, Terminate: whole.Output.Terminate, Handoff: whole.Output.Handoff}
	if diff := cmp.Diff(want, out.Output); diff != "" {
		t.Errorf("the outcome view reads otherwise than the state (-state +view):\n%s", diff)
	}
	if lim.Limits != whole.Limits || lim.Limits == (OutputLimits{}) {
		t.Errorf("the limits view reads %+v; the state holds %+v", lim.Limits, whole.Limits)
	}
}

// A call or job without output previews what toolPreview builds of no
// output under any limits, which is why InitPreview does not decode them
// then; each preview is a value of its own, free to change.
func TestNoOutputPreviewIsThePreviewOfNoOutputUnderAnyLimits(t *testing.T) {
	for _, l := range []OutputLimits{{}, {MaxBytes: 1, MaxLines: 1, Retain: "head"}, {MaxBytes: 10, MaxLines: 2, Retain: "tail"}, {MaxBytes: 1 << 20}} {
		want, err := toolPreview(l, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := noOutputPreview(nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("limits %+v: the preview of no output differs (-toolPreview +noOutputPreview):\n%s", l, diff)
		}
		got.(map[string]any)["terminate"] = "changed"
		if again, _ := noOutputPreview(nil); cmp.Diff(want, again) != "" {
			t.Fatal("a change to one preview of no output showed in the next")
		}
	}
	if _, err := noOutputPreview(errScratchTest); err != errScratchTest {
		t.Fatalf("noOutputPreview(err) = %v; want err", err)
	}
}

var errScratchTest = errors.New("scratch unreadable")
