package main

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pico-go/pico/storage"
)

// Every run records its spans in memory (unless run --otel takes them)
// and holds them to DESIGN §9's shape when it is judged, so the fuzzer
// explores telemetry with everything else: a turn's span is a root, an
// invocation is under its turn or a root of its own, every parent was
// started, nothing ends before it starts, and a turn that ended (not
// merely closed unfinished) ended because its inputs' results are terminal.

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
	for _, s := range r.rec.Started() {
		started[s.SpanContext().SpanID()] = s
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
		}
	}
	return nil
}

// turnEnded checks that an ended turn's inputs have terminal results.
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
