package main

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The frame rule (delta-and-messages §4, pico-v3 §4.6): a generation's
// durable frames are its stream, encoded. Nothing else reads them while a
// run goes well (the answer comes from the stream's final event, a preview
// and its check are built from the frames themselves), so an encoder that
// repeats, drops or misplaces what the stream said would pass every other
// check. The oracle therefore keeps each generation's frames as its scratch
// commits append and clear them, and holds them to the assistant entry the
// attempt ends with: they reduce to its content exactly when the stream
// ended with an answer (every frame is committed before it settles), even
// without their end frames (what a watcher saw stream), and to
// a prefix of it when it failed or was aborted (each block but the last
// whole, the last one's text a prefix, a tool call's arguments whatever
// they had reached).

// ruleFrames: a generation's frames reduce to what its stream said.
const ruleFrames oracleRule = "frames-replay-the-stream"

// framesSeen follows batch b's frame writes and holds the assistant
// entries it writes to the rule.
func (o *oracle) framesSeen(b storage.CommitBatch, by string, r storage.Range) error {
	for i, w := range b.Writes {
		switch {
		case w.Addr != nil && w.Addr.Namespace == agent.FramesList.Namespace && w.Addr.Scope.Kind == storage.ScopeScratch:
			task := w.Addr.Scope.ID
			switch w.Type {
			case storage.WriteListClear:
				delete(o.frames, task)
			case storage.WriteListAppend:
				var f ai.Frame
				if err := json.Unmarshal(w.Value, &f); err != nil {
					return o.fail(broke(ruleFrames, "%s appended a frame of generation %d at %d that does not decode: %v", by, task, r.First+storage.ID(i), err))
				}
				o.frames[task] = append(o.frames[task], f)
			}
		case w.Type == storage.WriteSettle && o.kinds[w.ID] == agent.GenerationKindName:
			defer delete(o.frames, w.ID) // after the batch's entries
		case w.Type == storage.WriteEntry && w.Entry != nil && w.Entry.Kind == "assistant" && o.kinds[w.Entry.ByTaskID] == agent.GenerationKindName && len(w.Entry.Model) == 1:
			if err := o.framesReplay(w.Entry, by); err != nil {
				return err
			}
		}
	}
	return nil
}

// framesReplay holds the frames of the generation that wrote entry e to
// its message.
func (o *oracle) framesReplay(e *storage.Entry, by string) error {
	frames := o.frames[e.ByTaskID]
	if len(frames) == 0 {
		return nil // a deferred answer fetched whole, or a stream that failed before it started
	}
	got, err := ai.ReduceFrames(frames)
	if err != nil {
		return o.fail(broke(ruleFrames, "%s wrote answer %d of generation %d, whose %d frames do not reduce: %v", by, e.ID, e.ByTaskID, len(frames), err))
	}
	want := e.Model[0]
	fail := func(format string, args ...any) error {
		return o.fail(broke(ruleFrames, "%s wrote answer %d (%s) of generation %d, whose %d frames %s", by, e.ID, want.StopReason, e.ByTaskID, len(frames), fmt.Sprintf(format, args...)))
	}
	whole := want.StopReason != ai.StopError && want.StopReason != ai.StopAborted
	if whole {
		if !reflect.DeepEqual(want.Content.Blocks, got.Content.Blocks) {
			if diff := cmp.Diff(want.Content.Blocks, got.Content.Blocks); diff != "" {
				return fail("reduce to other content (-answer +frames):\n%s", diff)
			}
		}
		// What a watcher saw stream, before each end frame put its block
		// whole, was the whole block too.
		var streamed []ai.Frame
		for _, f := range frames {
			if f.Type != ai.FrameTextEnd && f.Type != ai.FrameThinkingEnd && f.Type != ai.FrameToolCallEnd {
				streamed = append(streamed, f)
			}
		}
		s, err := ai.ReduceFrames(streamed)
		if err != nil {
			return fail("do not reduce without their end frames: %v", err)
		}
		for i, b := range s.Content.Blocks {
			w := want.Content.Blocks[i]
			if b.Text != w.Text || b.Thinking != w.Thinking || b.Type == ai.BlockToolCall && (b.ID != w.ID || b.Name != w.Name || !sameJSON(b.Arguments, w.Arguments)) {
				return fail("stream block %d as %s; the answer's is %s", i, blockShown(b), blockShown(w))
			}
		}
		return nil
	}
	blocks := got.Content.Blocks
	if len(blocks) > len(want.Content.Blocks) {
		return fail("reduce to %d blocks; the answer has %d", len(blocks), len(want.Content.Blocks))
	}
	for i, b := range blocks {
		w := want.Content.Blocks[i]
		last := i == len(blocks)-1
		switch {
		case b.Type != w.Type:
			return fail("reduce block %d to a %s; the answer's is a %s", i, b.Type, w.Type)
		case b.Type == ai.BlockToolCall && !last && !reflect.DeepEqual(b, w):
			return fail("reduce block %d to %s; the answer's is %s", i, blockShown(b), blockShown(w))
		case b.Type == ai.BlockToolCall:
		case !last && b.Text+b.Thinking != w.Text+w.Thinking:
			return fail("reduce block %d to %q; the answer's is %q", i, b.Text+b.Thinking, w.Text+w.Thinking)
		case len(b.Text+b.Thinking) > len(w.Text+w.Thinking) || (w.Text + w.Thinking)[:len(b.Text+b.Thinking)] != b.Text+b.Thinking:
			return fail("reduce its last block %d to %q, not a prefix of the answer's %q", i, b.Text+b.Thinking, w.Text+w.Thinking)
		}
	}
	return nil
}

// blockShown describes a block for a failure: its text, its thinking, or
// its call.
func blockShown(b ai.Block) string {
	switch b.Type {
	case ai.BlockThinking:
		return fmt.Sprintf("thinking %q", b.Thinking)
	case ai.BlockToolCall:
		return fmt.Sprintf("call %s %s(%s)", b.ID, b.Name, b.Arguments)
	}
	return fmt.Sprintf("%q", b.Text)
}
