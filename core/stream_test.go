package core_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
)

var frameList = storage.ScratchList[ai.Frame]("frames")

// streamKind streams one faux response into its scratch as compact frames
// through the harness's progress bridge. When a frame write is rejected
// (the abort mark revoked the invocation) it cancels the producer and joins
// it, reading the stream to its terminal event, before returning.
// producer is what a test learns about the stream a streamKind read.
type producer struct {
	joined bool          // the stream was read to its terminal event
	end    ai.StopReason // that event's reason
}

func streamKind(provider *faux.Provider, joined *producer, beforeSettle func(ctx context.Context, trt *core.TaskRuntime)) core.KindFuncs {
	k := simtest.StepKind("stream", nil)
	k.ExecuteFunc = func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
		if _, err := trt.Commit(ctx, func(tx *core.ConversationTx) error {
			tx.Patch(task.ID, core.TaskPatch{Status: "running"})
			return nil
		}); err != nil {
			return err
		}
		streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx)) // the producer stops on our word
		defer cancel()
		stream := provider.Stream(streamCtx, ai.Request{Messages: []ai.Message{ai.UserText("go", 0)}})
		progress := must(trt.Progress(ctx))
		var enc ai.FrameEncoder
		rejected := false
		for {
			ev, ok := stream.Next(streamCtx)
			if !ok {
				break
			}
			if ev.Terminal() {
				joined.end = ev.Reason
			}
			frame, has, err := enc.Encode(ev)
			if err != nil {
				return err
			}
			if has && !rejected && !progress.Write(func(sc core.ScratchTx) error { sc.Append(frameList.Address, frame); return nil }) {
				rejected = true
				cancel() // stop the producer; keep reading until it ends
			}
		}
		joined.joined = true
		if rejected {
			return core.ErrTaskCancelled
		}
		if beforeSettle != nil {
			beforeSettle(ctx, trt)
		}
		_, err := trt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "done", nil); return nil })
		return err
	}
	return k
}

func scratchFrames(t testing.TB, ctx context.Context, trt *core.TaskRuntime) []ai.Frame {
	var out []ai.Frame
	must(trt.Scratch(ctx, func(sc core.ScratchTx) error {
		p, err := sc.ReadList(frameList.Address, storage.ListQuery{Cursor: storage.Cursor{Limit: 10_000}})
		for _, e := range p.Items {
			var f ai.Frame
			if err := json.Unmarshal(e.Value, &f); err != nil {
				return err
			}
			out = append(out, f)
		}
		return err
	}))
	return out
}

func TestScratchHoldsCompactFramesThatRebuildTheMessage(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		provider := must(faux.New(s.Runtime(), s.Rand(), faux.Options{}))
		text := strings.Repeat("streamed token ", 20)
		provider.SetResponses(faux.Reply(faux.Text(text)))
		var joined producer
		var rebuilt *ai.Message
		var frames []ai.Frame
		kind := streamKind(provider, &joined, func(ctx context.Context, trt *core.TaskRuntime) {
			frames = scratchFrames(t, ctx, trt)
			rebuilt = must(ai.ReduceFrames(frames))
		})
		h := open(t, ctx, s, nil, kind)
		simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		must(h.Root().Drive(ctx))
		if rebuilt == nil || rebuilt.Content.TextOf() != text {
			t.Fatalf("frames rebuild %v; want the streamed text", rebuilt)
		}
		for i, f := range frames {
			if f.Type != ai.FrameStart && f.Partial != nil {
				t.Fatalf("frame %d (%s) carries a partial snapshot; frames must be compact", i, f.Type)
			}
		}
		h.Close(ctx)
	})
}

func TestARejectedFrameWriteCancelsAndJoinsTheProducerBeforeCompletion(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		provider := must(faux.New(rt, s.Rand(), faux.Options{TokensPerSecond: 40}))
		provider.SetResponses(faux.Reply(faux.Text(strings.Repeat("slow token ", 40))))
		var joined producer
		var joinedBeforeAbort bool
		var framesAtAbort int
		kind := streamKind(provider, &joined, nil)
		kind.AbortFunc = func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			joinedBeforeAbort = joined.joined && joined.end == ai.StopAborted
			framesAtAbort = len(scratchFrames(t, ctx, trt))
			_, err := trt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "aborted", nil); return nil })
			return err
		}
		h := open(t, ctx, s, nil, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		rt.Go(ctx, "driver", func(ctx context.Context) { h.Root().Drive(ctx) })
		rt.Sleep(ctx, 500_000_000) // half a virtual second of streaming
		must(0, h.AbortTask(ctx, id))
		must(h.Root().Drive(ctx))
		if !joinedBeforeAbort || framesAtAbort == 0 || simtest.Status(t, ctx, h, id) != "aborted" {
			t.Fatalf("producer cancelled and joined before abort %v, frames durable at abort %d, status %s; want true, > 0, aborted",
				joinedBeforeAbort, framesAtAbort, simtest.Status(t, ctx, h, id))
		}
		h.Close(ctx)
	})
}
