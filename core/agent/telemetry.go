package agent

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// Telemetry of a turn (DESIGN §9): an input group, from acceptance to its
// terminal results, is one trace named pico.turn. The generations that
// answer it are homed in it, and what they create (tools, post_tools,
// continuations) inherits the home, so their invocation spans, the
// provider calls, tool handlers and hooks inside them, and their commits
// are all under the turn; a group that forms when another ends starts a
// trace of its own, linked to the commit that formed it.

// turnKey names an input group's trace: its conversation and first input,
// which a group keeps while steering input joins it.
func turnKey(conv, first storage.ID) string {
	return fmt.Sprintf("turn/%d/%d", conv, first)
}

// startTurn opens the trace of the group inputs in conv when tx commits;
// since, when set, is the earliest acceptance among them (a queued input's
// turn starts when it was accepted, not when its group formed). A group
// whose trace is open already keeps it, and its pico.inputs attribute: the
// input that joins a running group later (steering) is not added.
func startTurn(tx *core.Tx, conv storage.ID, inputs []storage.ID, since time.Time) {
	if len(inputs) == 0 || !tx.Tracing() {
		return
	}
	ids := make([]int64, len(inputs))
	for i, id := range inputs {
		ids[i] = int64(id)
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(
		attribute.Int64("pico.conversation.id", int64(conv)),
		attribute.Int64Slice("pico.inputs", ids),
	)}
	if !since.IsZero() {
		opts = append(opts, trace.WithTimestamp(since))
	}
	tx.StartTrace(turnKey(conv, inputs[0]), "pico.turn", opts...)
}

// endTurn ends the group's trace with its terminal results' commit; a
// failed group's trace ends in error.
func endTurn(tx *core.Tx, conv storage.ID, inputs []storage.ID, outcome InputResult) {
	if len(inputs) == 0 || !tx.Tracing() {
		return
	}
	var err error
	if outcome.Status == InputFailed && !plant.On("failed-turn-trace-ok") {
		err = fmt.Errorf("input %s: %s", outcome.Status, outcome.Reason)
	}
	tx.EndTrace(turnKey(conv, inputs[0]), err)
}

// acceptedAt is when a queued item was accepted, as its user message says;
// zero when the item has no timestamped message.
func acceptedAt(item InboxItem) time.Time {
	for _, m := range item.Entry.Model {
		if m.Timestamp > 0 {
			return time.UnixMilli(m.Timestamp).UTC() // as the runtime's clocks read, whatever the machine's zone
		}
	}
	return time.Time{}
}

// providerSpan starts the span of one provider call: the model, its
// provider and the attempt it is.
func providerSpan(ctx context.Context, rt *core.TaskRuntime, model ai.Model, attempt int, deferred bool) (context.Context, trace.Span) {
	if !rt.Harness().Tracing() {
		return ctx, noop.Span{}
	}
	return rt.Harness().StartSpan(ctx, "pico.provider.call", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.provider.name", model.Provider),
		attribute.String("gen_ai.request.model", model.ID),
		attribute.Int("pico.attempt", attempt),
		attribute.Bool("pico.deferred", deferred),
	))
}

// endProviderSpan records how the call ended: the response's model, stop
// reason and usage, or its error.
func endProviderSpan(span trace.Span, final *ai.Message, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return
	}
	if final == nil {
		return
	}
	span.SetAttributes(attribute.String("gen_ai.response.finish_reason", string(final.StopReason)))
	if final.ResponseModel != "" {
		span.SetAttributes(attribute.String("gen_ai.response.model", final.ResponseModel))
	}
	if u := final.Usage; u != nil {
		span.SetAttributes(
			attribute.Int64("gen_ai.usage.input_tokens", u.Input),
			attribute.Int64("gen_ai.usage.output_tokens", u.Output),
			attribute.Int64("gen_ai.usage.cache_read_tokens", u.CacheRead),
			attribute.Int64("gen_ai.usage.cache_write_tokens", u.CacheWrite),
		)
	}
	if final.StopReason == ai.StopError && !plant.On("provider-span-error-unset") {
		span.SetStatus(codes.Error, final.ErrorMessage)
	}
}

// toolSpan starts the span of one tool handler's run.
func toolSpan(ctx context.Context, rt *core.TaskRuntime, name, callID string) (context.Context, trace.Span) {
	if !rt.Harness().Tracing() {
		return ctx, noop.Span{}
	}
	return rt.Harness().StartSpan(ctx, "pico.tool.call", trace.WithAttributes(
		attribute.String("gen_ai.tool.name", name),
		attribute.String("gen_ai.tool.call.id", callID),
	))
}
