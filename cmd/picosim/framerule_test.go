package main

import (
	"encoding/json"
	"testing"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// A generation's frames hold to the answer its attempt ends with: exactly,
// streamed and whole, when the stream answered; as a prefix when it
// failed. Frames that repeat a chunk the start showed, leave the start's
// text out, reach past the answer, or belong to a cleared attempt break
// the rule.
func TestFramesReplayTheStream(t *testing.T) {
	const gen = storage.ID(5)
	start := ai.Frame{Type: ai.FrameStart, Partial: &ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks()}}
	textStart := func(shown string) ai.Frame {
		return ai.Frame{Type: ai.FrameTextStart, Content: &ai.Block{Type: ai.BlockText, Text: shown}}
	}
	delta := func(d string) ai.Frame { return ai.Frame{Type: ai.FrameTextDelta, Delta: d} }
	end := func(text string) ai.Frame { return ai.Frame{Type: ai.FrameTextEnd, EndContent: text} }
	cases := []struct {
		name    string
		cleared []ai.Frame // frames of an earlier attempt, cleared before the frames
		frames  []ai.Frame
		stop    ai.StopReason
		broken  bool
	}{
		{name: "an answer streamed", frames: []ai.Frame{start, textStart(""), delta("Hell"), delta("o"), end("Hello")}, stop: ai.StopStop},
		{name: "an answer whose start showed a chunk", frames: []ai.Frame{start, textStart("Hell"), delta("o"), end("Hello")}, stop: ai.StopStop},
		{name: "an earlier attempt's frames cleared", cleared: []ai.Frame{start, textStart(""), delta("Bye")}, frames: []ai.Frame{start, textStart(""), delta("Hello"), end("Hello")}, stop: ai.StopStop},
		{name: "a chunk the start showed repeated", frames: []ai.Frame{start, textStart("Hell"), delta("Hell"), delta("o"), end("Hello")}, stop: ai.StopStop, broken: true},
		{name: "the start's text left out", frames: []ai.Frame{start, textStart(""), delta("o"), end("Hello")}, stop: ai.StopStop, broken: true},
		{name: "an end frame of other text", frames: []ai.Frame{start, textStart(""), delta("Hello"), end("Help")}, stop: ai.StopStop, broken: true},
		{name: "a failed stream's prefix", frames: []ai.Frame{start, textStart("He"), delta("l")}, stop: ai.StopError},
		{name: "a failed stream past its answer", frames: []ai.Frame{start, textStart("He"), delta("lp!")}, stop: ai.StopError, broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			o.kinds[gen] = agent.GenerationKindName
			frames := storage.Address{Scope: storage.Scope{Kind: storage.ScopeScratch, ID: gen}, Namespace: agent.FramesList.Namespace}
			var writes []storage.Write
			appendAll := func(fs []ai.Frame) {
				for _, f := range fs {
					raw, err := json.Marshal(f)
					if err != nil {
						t.Fatal(err)
					}
					writes = append(writes, storage.Write{Type: storage.WriteListAppend, Addr: &frames, Value: raw})
				}
			}
			appendAll(tc.cleared)
			if tc.cleared != nil {
				writes = append(writes, storage.Write{Type: storage.WriteListClear, Addr: &frames})
			}
			appendAll(tc.frames)
			if err := o.framesSeen(storage.CommitBatch{Kind: storage.BatchScratch, Task: gen, Writes: writes}, "the test", storage.Range{First: 10, Last: 10 + storage.ID(len(writes)) - 1}); err != nil {
				t.Fatalf("the frames alone: %v", err)
			}
			answer := &storage.Entry{ID: 40, Kind: "assistant", ByTaskID: gen, Model: []ai.Message{{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text("Hello")), StopReason: tc.stop}}}
			err := o.framesSeen(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteEntry, Entry: answer}, {Type: storage.WriteSettle, ID: gen}}}, "the test", storage.Range{First: 40, Last: 41})
			holdsOrBreaks(t, err, ruleFrames, tc.broken)
			if !tc.broken && len(o.frames) != 0 {
				t.Fatalf("frames kept after the generation settled: %v", o.frames)
			}
		})
	}
}
