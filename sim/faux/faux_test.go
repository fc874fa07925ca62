package faux_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/clock"
	"github.com/pico-go/pico/sim/faux"
)

// The simulator records the provider's calls into the run's trace.
var _ faux.Recorder = (*sim.Sim)(nil)

// eventsMax bounds how many events a test reads from one stream, so a
// stream that never ends fails the test instead of hanging it.
const eventsMax = 10_000

// seen is one event as a test observed it: when (virtual time since the run
// began) and what the live partial held at that moment.
type seen struct {
	ev   ai.StreamEvent
	at   time.Duration
	snap *ai.Message
}

// simulate runs body as the main actor of a simulation and returns the
// run's trace. Assertions belong after it returns: t.Fatal must not run on
// an actor's goroutine.
func simulate(t *testing.T, seed uint64, body func(ctx context.Context, s *sim.Sim)) *sim.Trace {
	t.Helper()
	trace := sim.NewTrace(nil, true)
	s := sim.New(sim.Options{Seed: seed, Trace: trace})
	if err := s.Run(context.Background(), func(ctx context.Context) { body(ctx, s) }); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return trace
}

// drain reads st to its end with ctx, then checks that Next keeps saying
// the stream is over.
func drain(ctx context.Context, rt core.Runtime, st ai.Stream) []seen {
	var out []seen
	for range eventsMax {
		ev, ok := st.Next(ctx)
		if !ok {
			if _, again := st.Next(ctx); again {
				panic("Next returned an event after reporting the end")
			}
			return out
		}
		out = append(out, seen{ev: ev, at: rt.Now().Sub(clock.Epoch), snap: snapshot(ev.Partial)})
	}
	panic("stream did not end")
}

func snapshot(m *ai.Message) *ai.Message {
	if m == nil {
		return nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	var out ai.Message
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return &out
}

// playOne plays steps on a fresh provider and reads one call to its end.
func playOne(t *testing.T, seed uint64, opts faux.Options, req ai.Request, steps ...faux.Step) ([]seen, *faux.Provider) {
	t.Helper()
	var events []seen
	var p *faux.Provider
	simulate(t, seed, func(ctx context.Context, s *sim.Sim) {
		p = mustProvider(faux.New(s.Runtime(), s.Rand(), opts))
		p.SetResponses(steps...)
		events = drain(ctx, s.Runtime(), p.Stream(ctx, req))
	})
	return events, p
}

// shape renders events as "type/index", terminal events as "type:reason".
func shape(events []seen) []string {
	out := make([]string, len(events))
	for i, e := range events {
		if e.ev.Terminal() {
			out[i] = fmt.Sprintf("%s:%s", e.ev.Type, e.ev.Reason)
		} else {
			out[i] = fmt.Sprintf("%s/%d", e.ev.Type, e.ev.ContentIndex)
		}
	}
	return out
}

func last(events []seen) ai.StreamEvent { return events[len(events)-1].ev }

func userReq(texts ...string) ai.Request {
	req := ai.Request{Model: ai.Model{ID: "faux-1"}}
	for _, text := range texts {
		req.Messages = append(req.Messages, ai.UserText(text, 0))
	}
	return req
}

const argsScripted = `{ "path": "a.go", "lines": [1, 2] }`
const argsCompact = `{"path":"a.go","lines":[1,2]}`

func thinkTextCall() faux.Step {
	return faux.Reply(
		faux.Thinking("plan it"),
		faux.Text("Hello there"),
		faux.ToolCall("call-1", "read", argsScripted),
	).WithStop(ai.StopToolUse)
}

func TestEventOrderForThinkingTextAndToolCall(t *testing.T) {
	// One token per chunk makes every chunk four characters, so the order
	// is exact: thinking "plan"+" it", text "Hell"+"o th"+"ere", the
	// arguments' 29 characters in 8 slices.
	events, _ := playOne(t, 1, faux.Options{TokenSize: faux.TokenSize{Min: 1, Max: 1}}, userReq("go"), thinkTextCall())
	want := []string{"start/0",
		"thinking_start/0", "thinking_delta/0", "thinking_delta/0", "thinking_end/0",
		"text_start/1", "text_delta/1", "text_delta/1", "text_delta/1", "text_end/1",
		"toolcall_start/2"}
	for range 8 {
		want = append(want, "toolcall_delta/2")
	}
	want = append(want, "toolcall_end/2", "done:toolUse")
	if diff := cmp.Diff(want, shape(events)); diff != "" {
		t.Fatalf("event order (-want +got):\n%s", diff)
	}
	var deltas []string
	for _, e := range events {
		if e.ev.Delta != "" {
			deltas = append(deltas, e.ev.Delta)
		}
	}
	wantDeltas := []string{"plan", " it", "Hell", "o th", "ere", `{"pa`, `th":`, `"a.g`, `o","`, `line`, `s":[`, `1,2]`, `}`}
	if diff := cmp.Diff(wantDeltas, deltas); diff != "" {
		t.Fatalf("deltas (-want +got):\n%s", diff)
	}
}

func TestDeltasReconstructBlocksAndPartialIsLive(t *testing.T) {
	for seed := range uint64(20) {
		events, _ := playOne(t, seed, faux.Options{}, userReq("go"), thinkTextCall())
		acc := map[int]string{}
		first := events[0].ev.Partial
		for i, e := range events {
			ev := e.ev
			if ev.Terminal() {
				if ev.Partial != nil {
					t.Fatalf("seed %d: terminal event carries a partial", seed)
				}
				continue
			}
			if ev.Partial == nil || ev.Partial != first {
				t.Fatalf("seed %d: event %d (%s) does not point at the live partial", seed, i, ev.Type)
			}
			acc[ev.ContentIndex] += ev.Delta
			if ev.Type == ai.EventTextDelta || ev.Type == ai.EventThinkingDelta {
				b := e.snap.Content.Blocks[ev.ContentIndex]
				if got := b.Text + b.Thinking; got != acc[ev.ContentIndex] {
					t.Fatalf("seed %d: partial holds %q after deltas %q", seed, got, acc[ev.ContentIndex])
				}
			}
			if ev.Type == ai.EventToolCallDelta {
				if got := string(e.snap.Content.Blocks[2].Arguments); got != "{}" {
					t.Fatalf("seed %d: partial tool call arguments %s mid-stream; want {}", seed, got)
				}
			}
		}
		if acc[0] != "plan it" || acc[1] != "Hello there" || acc[2] != argsCompact {
			t.Fatalf("seed %d: deltas rebuild %v; want thinking, text and compact arguments", seed, acc)
		}
		end := events[len(events)-2].ev
		if end.Type != ai.EventToolCallEnd || end.ToolCall.ID != "call-1" || end.ToolCall.Name != "read" || string(end.ToolCall.Arguments) != argsCompact {
			t.Fatalf("seed %d: toolcall_end = %+v; want the full call", seed, end.ToolCall)
		}
		done := last(events)
		if diff := cmp.Diff(done.Message.Content.Blocks, events[len(events)-2].snap.Content.Blocks); diff != "" {
			t.Fatalf("seed %d: partial after the last block differs from the final content:\n%s", seed, diff)
		}
		msg := done.Message
		if msg.API != "faux" || msg.Provider != "faux" || msg.Model != "faux-1" || msg.StopReason != ai.StopToolUse {
			t.Fatalf("seed %d: final message envelope %s/%s/%s %s", seed, msg.API, msg.Provider, msg.Model, msg.StopReason)
		}
		start := events[0]
		if len(start.snap.Content.Blocks) != 0 || start.snap.StopReason != ai.StopPending {
			t.Fatalf("seed %d: start partial %+v; want empty content, pending", seed, start.snap)
		}
	}
}

// With LateStarts a text or thinking block's start shows its first chunk
// (every other block its first two) already in the live partial, and the
// deltas that follow repeat them without appending them again: the partial
// always holds the deltas so far or more, the end holds the block, and the
// frame encoder's frames reduce to the final content. A tool call's start
// shows its first member's arguments, which its deltas catch up with.
func TestLateStartsShowTheFirstChunksTheirDeltasRepeat(t *testing.T) {
	for seed := range uint64(20) {
		events, _ := playOne(t, seed, faux.Options{LateStarts: true, TokenSize: faux.TokenSize{Min: 1, Max: 1}}, userReq("go"), thinkTextCall())
		acc := map[int]string{}
		var enc ai.FrameEncoder
		var frames []ai.Frame
		for i, e := range events {
			ev := e.ev
			live := ev
			live.Partial = e.snap // as the reader saw it then
			f, emit, err := enc.Encode(live)
			if err != nil {
				t.Fatalf("seed %d: encode event %d (%s): %v", seed, i, ev.Type, err)
			}
			if emit {
				frames = append(frames, f)
			}
			if ev.Terminal() {
				continue
			}
			acc[ev.ContentIndex] += ev.Delta
			if ev.Type != ai.EventTextStart && ev.Type != ai.EventThinkingStart && ev.Type != ai.EventTextDelta && ev.Type != ai.EventThinkingDelta {
				continue
			}
			b := e.snap.Content.Blocks[ev.ContentIndex]
			got := b.Text + b.Thinking
			if ev.Type == ai.EventTextStart || ev.Type == ai.EventThinkingStart {
				// The first chunk is 4 characters at a token a chunk; the
				// second block (text) shows two.
				if want := 4 * (1 + ev.ContentIndex%2); len(got) != want {
					t.Fatalf("seed %d: block %d starts with %q; want its first %d characters", seed, ev.ContentIndex, got, want)
				}
			}
			if !strings.HasPrefix(got, acc[ev.ContentIndex]) {
				t.Fatalf("seed %d: partial holds %q after deltas %q; want them and maybe more", seed, got, acc[ev.ContentIndex])
			}
		}
		if acc[0] != "plan it" || acc[1] != "Hello there" {
			t.Fatalf("seed %d: deltas rebuild %v; want every chunk still delivered", seed, acc)
		}
		done := last(events).Message
		m, err := ai.ReduceFrames(frames)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(done.Content.Blocks, m.Content.Blocks); diff != "" {
			t.Fatalf("seed %d: the frames reduce to other content (-final +frames):\n%s", seed, diff)
		}
		trimmed := map[int]string{}
		for _, f := range frames {
			if f.Type == ai.FrameTextDelta || f.Type == ai.FrameThinkingDelta {
				trimmed[f.ContentIndex] += f.Delta
			}
		}
		if want := map[int]string{0: " it", 1: "ere"}; !maps.Equal(trimmed, want) {
			t.Fatalf("seed %d: delta frames carry %v; want only what the starts did not show, %v", seed, trimmed, want)
		}
		// The call's start showed its first member; its deltas catch up in
		// one checkpoint, and the frames without their ends stream it whole.
		var streamed []ai.Frame
		checkpoints := 0
		for _, f := range frames {
			switch f.Type {
			case ai.FrameToolCallStart:
				if string(f.ToolCall.Arguments) != `{"path":"a.go"}` {
					t.Fatalf("seed %d: the call starts with arguments %s; want its first member", seed, f.ToolCall.Arguments)
				}
			case ai.FrameToolCallCheckpoint:
				checkpoints++
			}
			if f.Type != ai.FrameTextEnd && f.Type != ai.FrameThinkingEnd && f.Type != ai.FrameToolCallEnd {
				streamed = append(streamed, f)
			}
		}
		s, err := ai.ReduceFrames(streamed)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(s.Content.Blocks[2].Arguments); checkpoints != 1 || got != argsCompact {
			t.Fatalf("seed %d: %d checkpoints, streamed arguments %s; want one, and %s", seed, checkpoints, got, argsCompact)
		}
	}
}

// With SpacedArguments a tool call's deltas spell its arguments with a
// space after each colon and comma, and its end carries them as scripted:
// the frames reduce to the end's.
func TestSpacedArgumentsStreamSpacedAndEndAsScripted(t *testing.T) {
	events, _ := playOne(t, 1, faux.Options{SpacedArguments: true}, userReq("go"), thinkTextCall())
	var deltas string
	var enc ai.FrameEncoder
	var frames []ai.Frame
	for _, e := range events {
		live := e.ev
		live.Partial = e.snap
		f, emit, err := enc.Encode(live)
		if err != nil {
			t.Fatal(err)
		}
		if emit {
			frames = append(frames, f)
		}
		if e.ev.Type == ai.EventToolCallDelta {
			deltas += e.ev.Delta
		}
	}
	if want := `{"path": "a.go", "lines": [1, 2]}`; deltas != want {
		t.Fatalf("the call's deltas spell %s; want %s", deltas, want)
	}
	end := events[len(events)-2].ev
	if string(end.ToolCall.Arguments) != argsCompact {
		t.Fatalf("the call ends with %s; want the scripted %s", end.ToolCall.Arguments, argsCompact)
	}
	m, err := ai.ReduceFrames(frames)
	if err != nil || string(m.Content.Blocks[2].Arguments) != argsCompact {
		t.Fatalf("the frames reduce to %s (%v); want the end's %s", m.Content.Blocks[2].Arguments, err, argsCompact)
	}
}

func TestEveryStopReasonEndsWithItsEvent(t *testing.T) {
	rateLimited := faux.RateLimited()
	rateLimited.Message = &ai.Message{Content: ai.Blocks(faux.Text("par"))}
	cases := []struct {
		name      string
		step      faux.Step
		event     ai.EventType
		reason    ai.StopReason
		errorText string
		raw       string
	}{
		{"stop", faux.Reply(faux.Text("hi")), ai.EventDone, ai.StopStop, "", ""},
		{"length", faux.Reply(faux.Text("hi")).WithStop(ai.StopLength), ai.EventDone, ai.StopLength, "", ""},
		{"toolUse", faux.Reply(faux.ToolCall("t1", "ls", `{}`)).WithStop(ai.StopToolUse), ai.EventDone, ai.StopToolUse, "", ""},
		{"deferred", faux.Reply().WithStop(ai.StopDeferred), ai.EventDone, ai.StopDeferred, "", ""},
		{"error", faux.Reply(faux.Text("hi")).WithError("boom"), ai.EventError, ai.StopError, "boom", ""},
		{"aborted", faux.Reply(faux.Text("hi")).WithStop(ai.StopAborted), ai.EventError, ai.StopAborted, "", ""},
		{"retryable", rateLimited, ai.EventError, ai.StopError, faux.RateLimitedMessage, faux.RawRateLimited},
		{"overflow", faux.ContextOverflow(), ai.EventError, ai.StopError, "prompt is too long: 4 tokens > 128000 maximum", faux.RawContextOverflow},
		{"empty", faux.Step{}, ai.EventDone, ai.StopStop, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			events, _ := playOne(t, 3, faux.Options{}, userReq("abcdefgh"), tc.step)
			if events[0].ev.Type != ai.EventStart {
				t.Fatalf("first event %s; want start (scripted endings stream their content first)", events[0].ev.Type)
			}
			end := last(events)
			if end.Type != tc.event || end.Reason != tc.reason {
				t.Fatalf("ends with %s:%s; want %s:%s", end.Type, end.Reason, tc.event, tc.reason)
			}
			if end.Message == nil || end.Message.StopReason != tc.reason {
				t.Fatalf("terminal message %+v; want stopReason %s", end.Message, tc.reason)
			}
			if end.Message.ErrorMessage != tc.errorText || end.Message.RawStopReason != tc.raw {
				t.Fatalf("errorMessage %q rawStopReason %q; want %q %q", end.Message.ErrorMessage, end.Message.RawStopReason, tc.errorText, tc.raw)
			}
			for _, b := range end.Message.Content.Blocks {
				if b.Type == ai.BlockText && b.Text == "" {
					t.Fatalf("final message lost its text: %+v", end.Message.Content)
				}
			}
		})
	}
}

func TestCancellingTheStreamMidAnswerAbortsWithThePartial(t *testing.T) {
	// 10 tokens/s at one token (4 chars) per chunk: a chunk every 100ms.
	opts := faux.Options{TokensPerSecond: 10, TokenSize: faux.TokenSize{Min: 1, Max: 1}}
	var events []seen
	var afterEnd bool
	simulate(t, 5, func(ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		p := mustProvider(faux.New(rt, s.Rand(), opts))
		p.SetResponses(faux.Reply(faux.Text(strings.Repeat("abcd", 10))))
		streamCtx, cancel := context.WithCancel(ctx)
		rt.Go(ctx, "canceller", func(ctx context.Context) {
			if err := rt.Sleep(ctx, 350*time.Millisecond); err != nil {
				panic(err)
			}
			cancel()
		})
		// Next waits with the actor's own ctx: the stream's ctx alone must
		// end the wait.
		st := p.Stream(streamCtx, userReq("go"))
		events = drain(ctx, rt, st)
		_, afterEnd = st.Next(ctx)
	})
	want := []string{"start/0", "text_start/0", "text_delta/0", "text_delta/0", "text_delta/0", "error:aborted"}
	if diff := cmp.Diff(want, shape(events)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	end := last(events)
	if got := events[len(events)-1].at; got != 350*time.Millisecond {
		t.Fatalf("aborted at %v; want 350ms, the moment of cancellation", got)
	}
	msg := end.Message
	if msg.StopReason != ai.StopAborted || msg.ErrorMessage != faux.AbortedMessage || msg.Content.TextOf() != "abcdabcdabcd" {
		t.Fatalf("aborted message %q %q %q; want aborted, %q, the 12 characters streamed", msg.StopReason, msg.ErrorMessage, msg.Content.TextOf(), faux.AbortedMessage)
	}
	if afterEnd {
		t.Fatal("Next returned an event after the abort")
	}
}

func TestCancellingNextsContextAbortsTheStream(t *testing.T) {
	opts := faux.Options{TokensPerSecond: 10, TokenSize: faux.TokenSize{Min: 1, Max: 1}}
	var events []seen
	simulate(t, 6, func(ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		p := mustProvider(faux.New(rt, s.Rand(), opts))
		p.SetResponses(faux.Reply(faux.Text(strings.Repeat("abcd", 10))))
		readCtx, cancel := context.WithCancel(ctx)
		rt.Go(ctx, "canceller", func(ctx context.Context) {
			rt.Sleep(ctx, 150*time.Millisecond)
			cancel()
		})
		events = drain(readCtx, rt, p.Stream(ctx, userReq("go")))
	})
	end := last(events)
	if end.Reason != ai.StopAborted || end.Message.Content.TextOf() != "abcd" || events[len(events)-1].at != 150*time.Millisecond {
		t.Fatalf("ends %s with %q at %v; want aborted with %q at 150ms", end.Reason, end.Message.Content.TextOf(), events[len(events)-1].at, "abcd")
	}
}

func TestCancelledBeforeStartSendsOnlyTheAbort(t *testing.T) {
	var events []seen
	simulate(t, 7, func(ctx context.Context, s *sim.Sim) {
		p := mustProvider(faux.New(s.Runtime(), s.Rand(), faux.Options{}))
		p.SetResponses(faux.Reply(faux.Text("never")))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		events = drain(ctx, s.Runtime(), p.Stream(cctx, userReq("go")))
	})
	if diff := cmp.Diff([]string{"error:aborted"}, shape(events)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if msg := last(events).Message; len(msg.Content.Blocks) != 0 || msg.ErrorMessage != faux.AbortedMessage {
		t.Fatalf("aborted message %+v; want no content and %q", msg, faux.AbortedMessage)
	}
}

func TestExhaustedQueueEndsWithAnErrorNotAHang(t *testing.T) {
	var first, second []seen
	var p *faux.Provider
	simulate(t, 8, func(ctx context.Context, s *sim.Sim) {
		p = mustProvider(faux.New(s.Runtime(), s.Rand(), faux.Options{}))
		p.SetResponses(faux.Reply(faux.Text("only")))
		first = drain(ctx, s.Runtime(), p.Stream(ctx, userReq("a")))
		second = drain(ctx, s.Runtime(), p.Stream(ctx, userReq("b")))
	})
	if last(first).Type != ai.EventDone {
		t.Fatalf("first call ends %s; want done", last(first).Type)
	}
	if diff := cmp.Diff([]string{"error:error"}, shape(second)); diff != "" {
		t.Fatalf("second call (-want +got):\n%s", diff)
	}
	if got := last(second).Message.ErrorMessage; got != "No more faux responses queued" {
		t.Fatalf("errorMessage %q; want the reference's text", got)
	}
	if p.Calls() != 2 || p.Pending() != 0 {
		t.Fatalf("Calls %d Pending %d; want 2 and 0", p.Calls(), p.Pending())
	}
}

func TestFuncStepAnswersTheRequestAndRequestsRecordsIt(t *testing.T) {
	echo := faux.Respond(func(req ai.Request) (faux.Step, error) {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if m := req.Messages[i]; m.Role == ai.RoleUser {
				return faux.Reply(faux.Text("echo: " + m.Content.TextOf())), nil
			}
		}
		return faux.Step{}, errors.New("no user message")
	})
	req := ai.Request{
		Model: ai.Model{ID: "faux-1"},
		Messages: []ai.Message{
			{Role: ai.RoleSystem, Content: ai.PlainText("be brief")},
			ai.UserText("first", 1),
			{Role: ai.RoleAssistant, Content: ai.Blocks(faux.Text("ok")), StopReason: ai.StopStop},
			ai.UserText("second", 2),
		},
		Tools: []ai.Tool{{Name: "ls", Description: "list", Parameters: json.RawMessage(`{"type":"object"}`)}},
	}
	sent := snapshotRequest(req)
	var events []seen
	var p *faux.Provider
	simulate(t, 9, func(ctx context.Context, s *sim.Sim) {
		p = mustProvider(faux.New(s.Runtime(), s.Rand(), faux.Options{}))
		p.SetResponses(echo)
		st := p.Stream(ctx, req)
		// The harness changes its own copy afterwards; the record must not.
		req.Messages[3].Content.Blocks[0].Text = "edited"
		req.Tools[0].Parameters[2] = 'X'
		events = drain(ctx, s.Runtime(), st)
	})
	if got := last(events).Message.Content.TextOf(); got != "echo: second" {
		t.Fatalf("answer %q; want %q", got, "echo: second")
	}
	reqs := p.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded; want 1", len(reqs))
	}
	if diff := cmp.Diff(sent, reqs[0]); diff != "" {
		t.Fatalf("recorded request differs from what was sent (-sent +recorded):\n%s", diff)
	}
	reqs[0].Messages[0].Content.Blocks[0].Text = "mutated"
	if p.Requests()[0].Messages[0].Content.TextOf() != "be brief" {
		t.Fatal("Requests hands out the provider's own memory")
	}
}

func snapshotRequest(r ai.Request) ai.Request {
	raw, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	var out ai.Request
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return out
}

func TestFuncStepFailuresEndWithAnErrorEvent(t *testing.T) {
	var loop func(ai.Request) (faux.Step, error)
	loop = func(ai.Request) (faux.Step, error) { return faux.Respond(loop), nil }
	cases := []struct {
		name string
		step faux.Step
		want string
	}{
		{"returns an error", faux.Respond(func(ai.Request) (faux.Step, error) { return faux.Step{}, errors.New("backend exploded") }), "backend exploded"},
		{"never settles", faux.Respond(loop), "faux: call 1: step functions nested deeper than 8"},
		{"returns an invalid step", faux.Respond(func(ai.Request) (faux.Step, error) {
			return faux.Reply(faux.ToolCall("", "ls", "{}")), nil
		}), "faux: call 1: content[0].id: toolCall without id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			events, _ := playOne(t, 10, faux.Options{}, userReq("go"), tc.step)
			if diff := cmp.Diff([]string{"error:error"}, shape(events)); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			if got := last(events).Message.ErrorMessage; got != tc.want {
				t.Fatalf("errorMessage %q; want %q", got, tc.want)
			}
		})
	}
}

func TestInvalidGoStepsFailTheirCall(t *testing.T) {
	cases := []struct {
		name string
		step faux.Step
		want string
	}{
		{"tool call without id", faux.Reply(faux.ToolCall("", "ls", "{}")), "faux: call 1: content[0].id: toolCall without id"},
		{"arguments not an object", faux.Reply(faux.Text("a"), faux.ToolCall("t", "ls", "[1]")), "faux: call 1: content[1].arguments: arguments are not a JSON object: [1]"},
		{"negative delay", faux.Reply().WithDelay(-time.Millisecond), "faux: call 1: delay: negative delay -1ms"},
		{"pending", faux.Reply().WithStop(ai.StopPending), "faux: call 1: stopReason: pending is not a final stop reason"},
		{"retryable and stop", faux.RateLimited().WithStop(ai.StopStop), "faux: call 1: stopReason: a retryable or overflow step fails with error, not stop"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.step.Validate(); err == nil || !strings.HasPrefix(tc.want, "faux: call 1: ") || err.Error() != "faux: "+strings.TrimPrefix(tc.want, "faux: call 1: ") {
				t.Fatalf("Validate() = %v; want %q", err, "faux: "+strings.TrimPrefix(tc.want, "faux: call 1: "))
			}
			events, _ := playOne(t, 11, faux.Options{}, userReq("go"), tc.step)
			if got := last(events).Message.ErrorMessage; len(events) != 1 || got != tc.want {
				t.Fatalf("%v ending %q; want one error event %q", shape(events), got, tc.want)
			}
		})
	}
}

func TestUsageIsEstimatedUnlessScripted(t *testing.T) {
	zeroCost := ai.Cost{}
	cases := []struct {
		name string
		req  ai.Request
		step faux.Step
		want ai.Usage
	}{
		{
			// "user:abcdefgh" is 13 chars → 4 tokens; "hello" → 2.
			"estimate", userReq("abcdefgh"), faux.Reply(faux.Text("hello")),
			ai.Usage{Input: 4, Output: 2, TotalTokens: 6},
		},
		{
			// "system:sys\n\nuser:hi" is 19 chars → 5; "ls:{\"a\":1}" → 3.
			"system prompt and tool call",
			ai.Request{Messages: []ai.Message{{Role: ai.RoleSystem, Content: ai.PlainText("sys")}, ai.UserText("hi", 0)}},
			faux.Reply(faux.ToolCall("t", "ls", `{ "a": 1 }`)),
			ai.Usage{Input: 5, Output: 3, TotalTokens: 8},
		},
		{
			"scripted", userReq("abcdefgh"), faux.Reply(faux.Text("hello")).WithUsage(ai.Usage{Input: 100, Output: 7, TotalTokens: 107}),
			ai.Usage{Input: 100, Output: 7, TotalTokens: 107},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			events, _ := playOne(t, 12, faux.Options{}, tc.req, tc.step)
			got := last(events).Message.Usage
			if got == nil || got.Cost != zeroCost {
				t.Fatalf("usage %+v; want a usage with zero cost", got)
			}
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Fatalf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPriceCostsEachKindOfToken: with a price, an estimated usage costs
// its tokens of each kind at that kind's price, and its total is their sum;
// a scripted usage keeps its own cost, and a negative price is refused.
func TestPriceCostsEachKindOfToken(t *testing.T) {
	price := ai.Cost{Input: 2, Output: 8, CacheRead: 0.5, CacheWrite: 3}
	var usages []ai.Usage
	simulate(t, 15, func(ctx context.Context, s *sim.Sim) {
		p := mustProvider(faux.New(s.Runtime(), s.Rand(), faux.Options{Price: price}))
		scripted := ai.Usage{Input: 9, Output: 1, TotalTokens: 10, Cost: ai.Cost{Input: 0.25, Total: 0.25}}
		p.SetResponses(faux.Reply(faux.Text("hello")), faux.Reply(faux.Text("ok")), faux.Reply(faux.Text("x")).WithUsage(scripted))
		first := userReq("abcdefgh")
		first.SessionID = "s1"
		second := first
		second.Messages = append(slices.Clone(first.Messages),
			ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(faux.Text("hello"))}, ai.UserText("more", 0))
		for _, req := range []ai.Request{first, second, first} {
			usages = append(usages, *last(drain(ctx, s.Runtime(), p.Stream(ctx, req))).Message.Usage)
		}
		if _, err := faux.New(s.Runtime(), s.Rand(), faux.Options{Price: ai.Cost{CacheRead: -1}}); err == nil || !strings.Contains(err.Error(), "Price") {
			t.Errorf("a negative price: error %v; want one naming Price", err)
		}
	})
	// The token counts of TestSessionPromptPrefixCountsAsCacheRead.
	want := []ai.Usage{
		{Input: 4, Output: 2, CacheWrite: 4, TotalTokens: 10, Cost: ai.Cost{Input: 8, Output: 16, CacheWrite: 12, Total: 36}},
		{Input: 7, Output: 1, CacheRead: 4, CacheWrite: 7, TotalTokens: 19, Cost: ai.Cost{Input: 14, Output: 8, CacheRead: 2, CacheWrite: 21, Total: 45}},
		{Input: 9, Output: 1, TotalTokens: 10, Cost: ai.Cost{Input: 0.25, Total: 0.25}},
	}
	if diff := cmp.Diff(want, usages); diff != "" {
		t.Fatalf("usage (-want +got):\n%s", diff)
	}
}

func TestSessionPromptPrefixCountsAsCacheRead(t *testing.T) {
	var usages []ai.Usage
	simulate(t, 13, func(ctx context.Context, s *sim.Sim) {
		p := mustProvider(faux.New(s.Runtime(), s.Rand(), faux.Options{}))
		p.SetResponses(faux.Reply(faux.Text("hello")), faux.Reply(faux.Text("ok")))
		first := userReq("abcdefgh")
		first.SessionID = "s1"
		second := first
		second.Messages = append(slices.Clone(first.Messages),
			ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(faux.Text("hello"))}, ai.UserText("more", 0))
		for _, req := range []ai.Request{first, second} {
			usages = append(usages, *last(drain(ctx, s.Runtime(), p.Stream(ctx, req))).Message.Usage)
		}
	})
	// First: no previous prompt, the whole prompt is written to the cache.
	// Second: 41 chars, the first 13 shared → read 4, write 7, input 11-4.
	want := []ai.Usage{
		{Input: 4, Output: 2, CacheWrite: 4, TotalTokens: 10},
		{Input: 7, Output: 1, CacheRead: 4, CacheWrite: 7, TotalTokens: 19},
	}
	if diff := cmp.Diff(want, usages); diff != "" {
		t.Fatalf("usage (-want +got):\n%s", diff)
	}
}

func TestPacingSpendsVirtualTime(t *testing.T) {
	// 20 tokens/s at two tokens (8 chars) per chunk: 100ms per chunk,
	// after a 50ms scripted delay.
	opts := faux.Options{TokensPerSecond: 20, TokenSize: faux.TokenSize{Min: 2, Max: 2}}
	step := faux.Reply(faux.Text(strings.Repeat("abcdefgh", 3)), faux.ToolCall("t", "ls", `{"k":1}`)).WithDelay(50 * time.Millisecond)
	events, _ := playOne(t, 14, opts, userReq("go"), step)
	var got []string
	for _, e := range events {
		got = append(got, fmt.Sprintf("%s@%d", e.ev.Type, e.at.Milliseconds()))
	}
	want := []string{"start@50", "text_start@50", "text_delta@150", "text_delta@250", "text_delta@350", "text_end@350",
		"toolcall_start@350", "toolcall_delta@450", "toolcall_end@450", "done@450"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("event times (-want +got):\n%s", diff)
	}
}

func TestEveryChunkIsASchedulingPointWithoutPacing(t *testing.T) {
	// Another actor yields as often as the stream has chunks; with no pacing
	// the log still interleaves, because each chunk hands control back.
	var log []byte
	var end time.Duration
	simulate(t, 15, func(ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		p := mustProvider(faux.New(rt, s.Rand(), faux.Options{TokenSize: faux.TokenSize{Min: 1, Max: 1}}))
		p.SetResponses(faux.Reply(faux.Text(strings.Repeat("abcd", 30))))
		done := rt.NewEvent("other-done")
		rt.Go(ctx, "other", func(ctx context.Context) {
			for range 30 {
				rt.Sleep(ctx, 0)
				log = append(log, 'o')
			}
			done.Set()
		})
		st := p.Stream(ctx, userReq("go"))
		for {
			ev, ok := st.Next(ctx)
			if !ok {
				break
			}
			if ev.Type == ai.EventTextDelta {
				log = append(log, 's')
			}
		}
		end = rt.Now().Sub(clock.Epoch)
		done.Wait(ctx)
	})
	if end != 0 {
		t.Fatalf("an unpaced stream took %v of virtual time; want 0", end)
	}
	switches := 0
	for i := 1; i < len(log); i++ {
		if log[i] != log[i-1] {
			switches++
		}
	}
	if switches < 10 {
		t.Fatalf("log %s switches actors %d times; want the stream and the other actor interleaved", log, switches)
	}
}

func TestSameSeedSameEventsAndSeedsChangeChunking(t *testing.T) {
	opts := faux.Options{TokensPerSecond: 50}
	step := faux.Reply(faux.Thinking(strings.Repeat("think ", 20)), faux.Text(strings.Repeat("lorem ipsum ", 20)),
		faux.ToolCall("t1", "write", `{"path":"x.txt","body":"`+strings.Repeat("z", 60)+`"}`))
	render := func(events []seen) string {
		var b strings.Builder
		for _, e := range events {
			fmt.Fprintf(&b, "%s/%d@%d %q\n", e.ev.Type, e.ev.ContentIndex, e.at.Microseconds(), e.ev.Delta)
		}
		return b.String()
	}
	bySeed := map[string]uint64{}
	for seed := range uint64(50) {
		a, _ := playOne(t, seed, opts, userReq("go"), step)
		b, _ := playOne(t, seed, opts, userReq("go"), step)
		if ra, rb := render(a), render(b); ra != rb {
			t.Fatalf("seed %d: two runs differ:\n%s\n---\n%s", seed, ra, rb)
		}
		bySeed[render(a)] = seed
	}
	if len(bySeed) < 2 {
		t.Fatal("50 seeds all chunked the response the same way; want the seed to choose chunk sizes")
	}
}

func TestCallsAreRecordedInTheTrace(t *testing.T) {
	trace := simulate(t, 16, func(ctx context.Context, s *sim.Sim) {
		p := mustProvider(faux.New(s.Runtime(), s.Rand(), faux.Options{Recorder: s}))
		p.SetResponses(faux.Reply(faux.Text("hi")))
		drain(ctx, s.Runtime(), p.Stream(ctx, userReq("go")))
		drain(ctx, s.Runtime(), p.Stream(ctx, userReq("go")))
	})
	var kinds []string
	for _, line := range trace.Lines() {
		var rec struct {
			K      string          `json:"k"`
			Detail json.RawMessage `json:"detail"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(rec.K, "faux.") {
			kinds = append(kinds, rec.K+" "+string(rec.Detail))
		}
	}
	want := []string{
		`faux.call {"call":1,"model":"faux-1","messages":1,"answer":"stop","pending":0}`,
		`faux.end {"call":1,"event":"done","reason":"stop","blocks":1}`,
		`faux.call {"call":2,"model":"faux-1","messages":1,"answer":"error: No more faux responses queued","pending":0}`,
		`faux.end {"call":2,"event":"error","reason":"error","blocks":0}`,
	}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Fatalf("trace records (-want +got):\n%s", diff)
	}
}

func TestModelsDefaultAndAnswersAreRestamped(t *testing.T) {
	var p *faux.Provider
	var events []seen
	simulate(t, 17, func(ctx context.Context, s *sim.Sim) {
		p = mustProvider(faux.New(s.Runtime(), s.Rand(), faux.Options{}))
		p.SetResponses(faux.Reply(faux.Text("hi")))
		req := userReq("go")
		req.Model = ai.Model{ID: "big", Provider: "acme", API: "acme-messages"}
		events = drain(ctx, s.Runtime(), p.Stream(ctx, req))
	})
	want := []ai.Model{{ID: "faux-1", Provider: "faux", API: "faux", ContextWindow: 128000, MaxTokens: 16384}}
	if diff := cmp.Diff(want, p.Models()); diff != "" {
		t.Fatalf("models (-want +got):\n%s", diff)
	}
	msg := last(events).Message
	if msg.Model != "big" || msg.Provider != "acme" || msg.API != "acme-messages" || msg.Timestamp != clock.Epoch.UnixMilli() {
		t.Fatalf("answer stamped %s/%s/%s at %d; want the requested model at the virtual epoch", msg.API, msg.Provider, msg.Model, msg.Timestamp)
	}
	if start := events[0].snap; start.Model != "big" || start.API != "acme-messages" {
		t.Fatalf("start partial stamped %s/%s; want the requested model", start.API, start.Model)
	}
}

func TestDeferredAnswerIsFetchedLater(t *testing.T) {
	opts := faux.Options{Deferred: faux.DeferredOptions{PendingFetches: 1, PollAfterMs: 500}}
	var got []string
	var handle ai.Deferred
	var p *faux.Provider
	simulate(t, 18, func(ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		p = mustProvider(faux.New(rt, s.Rand(), opts))
		p.SetResponses(faux.Reply().WithStop(ai.StopDeferred), faux.Reply(faux.Text("later")), faux.Reply().WithStop(ai.StopDeferred))
		end := func(st ai.Stream) ai.StreamEvent {
			ev := last(drain(ctx, rt, st))
			got = append(got, fmt.Sprintf("%s:%s %s%s", ev.Type, ev.Reason, ev.Message.Content.TextOf(), ev.Message.ErrorMessage))
			return ev
		}
		handle = *end(p.Stream(ctx, userReq("go"))).Message.Deferred
		end(p.FetchDeferred(ctx, handle)) // still pending
		end(p.FetchDeferred(ctx, handle)) // resolves to the next step
		end(p.FetchDeferred(ctx, handle)) // replays it
		end(p.FetchDeferred(ctx, ai.Deferred{ID: "nope", Provider: "faux", ModelID: "faux-1", API: "faux"}))
		other := *end(p.Stream(ctx, userReq("again"))).Message.Deferred
		p.CancelDeferred(other)
		end(p.FetchDeferred(ctx, other))
	})
	want := []string{
		"done:deferred ", "done:deferred ", "done:stop later", "done:stop later",
		"error:error faux: unknown deferred response nope",
		"done:deferred ", "error:error faux: deferred response faux-deferred-2 was cancelled",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("endings (-want +got):\n%s", diff)
	}
	wantHandle := ai.Deferred{Provider: "faux", ModelID: "faux-1", API: "faux", ID: "faux-deferred-1", PollAfterMs: 500}
	if diff := cmp.Diff(wantHandle, handle); diff != "" {
		t.Fatalf("handle (-want +got):\n%s", diff)
	}
	if p.Calls() != 2 || p.DeferredFetches() != 5 || len(p.CancelledDeferred()) != 1 || p.Pending() != 0 {
		t.Fatalf("Calls %d DeferredFetches %d cancelled %d Pending %d; want 2, 5, 1, 0",
			p.Calls(), p.DeferredFetches(), len(p.CancelledDeferred()), p.Pending())
	}
}

const validScript = `{"steps": [
	{"content": [
		{"type": "thinking", "thinking": "hmm"},
		{"type": "text", "text": "reading"},
		{"type": "toolCall", "id": "t1", "name": "read", "arguments": {"path": "x"}}
	], "stopReason": "toolUse", "delayMs": 20},
	{"retryable": true},
	{"overflow": true, "errorMessage": "prompt is too long: 200001 tokens > 200000 maximum"},
	{"content": [{"type": "text", "text": "done"}], "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}}
]}`

func TestParsedScriptPlaysInOrder(t *testing.T) {
	sc, err := faux.ParseScript([]byte(validScript))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var startAt time.Duration
	simulate(t, 19, func(ctx context.Context, s *sim.Sim) {
		p := mustProvider(faux.New(s.Runtime(), s.Rand(), faux.Options{}))
		p.SetResponses(sc.Responses()...)
		for i := range 4 {
			events := drain(ctx, s.Runtime(), p.Stream(ctx, userReq("go")))
			if i == 0 {
				startAt = events[0].at
			}
			m := last(events).Message
			got = append(got, fmt.Sprintf("%s %s %s|%s|%d", m.StopReason, m.RawStopReason, m.ErrorMessage, m.Content.TextOf(), len(m.Content.Blocks)))
		}
	})
	want := []string{
		"toolUse  |reading|3",
		"error rate_limited rate limited (429)||0",
		"error context_overflow prompt is too long: 200001 tokens > 200000 maximum||0",
		"stop  |done|1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("played script (-want +got):\n%s", diff)
	}
	if startAt != 20*time.Millisecond {
		t.Fatalf("first step started at %v; want its 20ms delay", startAt)
	}
}

func TestParseScriptRejectsBrokenStepsNamingTheField(t *testing.T) {
	cases := []struct {
		name, script, want string
	}{
		{"unknown stop reason", `{"steps":[{"stopReason":"finished"}]}`, `faux: steps[0].stopReason: unknown stop reason "finished"`},
		{"pending stop reason", `{"steps":[{"stopReason":"pending"}]}`, `faux: steps[0].stopReason: pending is not a final stop reason`},
		{"negative delay", `{"steps":[{},{"delayMs":-5}]}`, `faux: steps[1].delayMs: negative delay -5`},
		{"tool call without id", `{"steps":[{"content":[{"type":"text","text":"a"},{"type":"toolCall","name":"read","arguments":{}}]}]}`, `faux: steps[0].content[1].id: toolCall without id`},
		{"arguments an array", `{"steps":[{"content":[{"type":"toolCall","id":"t","name":"ls","arguments":[1]}]}]}`, `faux: steps[0].content[0].arguments: arguments are not a JSON object`},
		{"arguments a string", `{"steps":[{"content":[{"type":"toolCall","id":"t","name":"ls","arguments":"{}"}]}]}`, `faux: steps[0].content[0].arguments: arguments are not a JSON object`},
		{"arguments null", `{"steps":[{"content":[{"type":"toolCall","id":"t","name":"ls","arguments":null}]}]}`, `faux: steps[0].content[0].arguments: arguments are not a JSON object`},
		{"unknown block type", `{"steps":[{"content":[{"type":"video"}]}]}`, `faux: steps[0].content[0].type: unknown block type "video"`},
		{"image block", `{"steps":[{"content":[{"type":"image"}]}]}`, `faux: steps[0].content[0].type: an assistant message holds no image blocks`},
		{"retryable and overflow", `{"steps":[{"retryable":true,"overflow":true}]}`, `faux: steps[0].overflow: a step is retryable or an overflow, not both`},
		{"retryable that stops", `{"steps":[{"retryable":true,"stopReason":"stop"}]}`, `faux: steps[0].stopReason: a retryable or overflow step fails with error, not stop`},
		{"unknown step field", `{"steps":[{"text":"x"}]}`, `faux: script: json: unknown field "text"`},
		{"unknown block field", `{"steps":[{"content":[{"type":"text","txt":"x"}]}]}`, `faux: script: json: unknown field "txt"`},
		{"unknown usage field", `{"steps":[{"usage":{"tokens":1}}]}`, `faux: script: json: unknown field "tokens"`},
		{"trailing data", `{"steps":[]} {}`, `faux: script: data after the script object`},
		{"not json", `steps:`, `faux: script: invalid character 's' looking for beginning of value`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := faux.ParseScript([]byte(tc.script))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("ParseScript error = %v; want %q", err, tc.want)
			}
		})
	}
}

func TestScriptRoundTripsThroughJSON(t *testing.T) {
	sc, err := faux.ParseScript([]byte(validScript))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	again, err := faux.ParseScript(raw)
	if err != nil {
		t.Fatalf("re-parsing %s: %v", raw, err)
	}
	// Encoding compacts the arguments, so compare encodings.
	rawAgain, err := json.Marshal(again)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != string(rawAgain) {
		t.Fatalf("script changed across a JSON round trip:\n%s\n%s", raw, rawAgain)
	}
	if len(again.Responses()) != 4 {
		t.Fatalf("%d responses; want 4", len(again.Responses()))
	}
}

// mustProvider is New that must succeed.
func mustProvider(p *faux.Provider, err error) *faux.Provider {
	if err != nil {
		panic(err)
	}
	return p
}

// Misuse is an error, not a panic (issue 23).
func TestNewRefusesMissingDependencies(t *testing.T) {
	s := sim.New(sim.Options{Seed: 1})
	cases := map[string]func() (*faux.Provider, error){
		"no runtime": func() (*faux.Provider, error) { return faux.New(nil, s.Rand(), faux.Options{}) },
		"no source":  func() (*faux.Provider, error) { return faux.New(s.Runtime(), nil, faux.Options{}) },
		"a negative tempo": func() (*faux.Provider, error) {
			return faux.New(s.Runtime(), s.Rand(), faux.Options{TokensPerSecond: -1})
		},
	}
	for name, build := range cases {
		if p, err := build(); err == nil || p != nil {
			t.Errorf("%s: New = %v, %v; want an error", name, p, err)
		}
	}
}
