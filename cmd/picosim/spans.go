package main

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// Every run records its spans in memory (unless run --otel takes them)
// and holds them to DESIGN §9's shape when it is judged, so the fuzzer
// explores telemetry with everything else: a turn's span is a root, an
// invocation is under its turn or a root of its own, every parent was
// started, nothing ends before it starts, a turn that ended (not merely
// closed unfinished) ended because its inputs' results are terminal, in
// error exactly when its first input failed, a provider call's span is in
// error exactly when its answer stopped on an error, and a run whose
// generations ran traced a turn.

// spanSeeds: one seed in spanSeeds records its spans. Recording costs a
// run about an eighth of its time; every third seed keeps the fuzzer's
// pace and still draws telemetry through every scenario, fault and
// schedule (the choice is the seed's, so a run is still its arguments).
const spanSeeds = 3

// runSpans is a run's span recorder and the provider the harness gets.
type runSpans struct {
	rec *tracetest.SpanRecorder
	tp  trace.TracerProvider
}

func newRunSpans(seed uint64) *runSpans {
	rec := tracetest.NewSpanRecorder()
	return &runSpans{rec: rec, tp: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(newSeededIDs(seed)))}
}

// check holds the ended spans to their shape; store is the session as the
// run leaves it.
func (r *runSpans) check(ctx context.Context, store storage.Storage) error {
	if r == nil {
		return nil
	}
	started := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	turns := 0
	for _, s := range r.rec.Started() {
		started[s.SpanContext().SpanID()] = s
		if s.Name() == "pico.turn" {
			turns++
		}
	}
	// A generation answers a turn: a run whose generations ran traced some.
	for _, s := range r.rec.Ended() {
		if s.Name() == "pico.task.execute" && spanAttr(s, "pico.task.kind").AsString() == agent.GenerationKindName && turns == 0 {
			return broke(ruleSpanTree, "generation %s ran, and no turn was traced", spanAttr(s, "pico.task.id").Emit())
		}
	}
	for _, s := range r.rec.Ended() {
		if s.EndTime().Before(s.StartTime()) {
			return broke(ruleSpanTree, "%s ends at %v, before it starts at %v", s.Name(), s.EndTime(), s.StartTime())
		}
		var parent sdktrace.ReadOnlySpan
		if s.Parent().IsValid() {
			var ok bool
			if parent, ok = started[s.Parent().SpanID()]; !ok {
				return broke(ruleSpanTree, "%s names a parent span that never started", s.Name())
			}
			if parent.SpanContext().TraceID() != s.SpanContext().TraceID() {
				return broke(ruleSpanTree, "%s is in another trace than its parent %s", s.Name(), parent.Name())
			}
		}
		switch {
		case s.Name() == "pico.turn" && parent != nil:
			return broke(ruleSpanTree, "a turn's span is under %s; a turn is a trace's root", parent.Name())
		case strings.HasPrefix(s.Name(), "pico.task.") && parent != nil && parent.Name() != "pico.turn":
			return broke(ruleSpanTree, "%s of task %s is under %s; an invocation is under its turn or a root", s.Name(), spanAttr(s, "pico.task.id").Emit(), parent.Name())
		case s.Name() == "pico.turn" && !spanAttr(s, "pico.trace.unfinished").AsBool():
			if err := turnEnded(ctx, store, s); err != nil {
				return err
			}
		case s.Name() == "pico.provider.call":
			// A call whose answer stopped on an error ends in error; one
			// that ended otherwise with an answer does not.
			reason := spanAttr(s, "gen_ai.response.finish_reason").AsString()
			failed := s.Status().Code == codes.Error
			if reason != "" && failed != (reason == string(ai.StopError)) {
				return broke(ruleSpanTree, "a provider call's span ends with status %v and finish reason %q; it is in error exactly when the answer stopped on one", s.Status().Code, reason)
			}
		}
	}
	return nil
}

// turnEnded checks that an ended turn's inputs have terminal results, and
// that the turn is in error exactly when its first input failed.
func turnEnded(ctx context.Context, store storage.Storage, turn sdktrace.ReadOnlySpan) error {
	conv := storage.ID(spanAttr(turn, "pico.conversation.id").AsInt64())
	results, err := inputResults(ctx, store, conv)
	if err != nil {
		return err
	}
	for _, in := range spanAttr(turn, "pico.inputs").AsInt64Slice() {
		r, ok := results[storage.ID(in)]
		if !ok || !r.Status.Terminal() {
			return broke(ruleSpanTree, "the turn of input %d in conversation %d ended, but the input is %q", in, conv, r.Status)
		}
	}
	if ins := spanAttr(turn, "pico.inputs").AsInt64Slice(); len(ins) > 0 {
		first := results[storage.ID(ins[0])]
		if failed := turn.Status().Code == codes.Error; failed != (first.Status == agent.InputFailed) {
			return broke(ruleSpanTree, "the turn of input %d in conversation %d ended with status %v, and the input is %q; a turn is in error exactly when its input failed",
				ins[0], conv, turn.Status().Code, first.Status)
		}
	}
	return nil
}

func spanAttr(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}
