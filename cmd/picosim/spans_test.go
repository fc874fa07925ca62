package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage/memory"
)

// The span-tree check refuses each shape DESIGN §9 rules out, naming the
// rule, and passes the shape the harness makes.
func TestSpanTreeCheckRefusesWhatATurnIsNot(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	h, err := agent.Open(ctx, store, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	root := h.Root()
	input, _, err := root.Write(ctx, core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": "placed at once"}})
	if err != nil {
		t.Fatal(err)
	}
	// Accepted and never driven: its generation is live, the input running.
	running, err := root.Accept(ctx, ai.PlainText("hello"), agent.AcceptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	turnAttrs := func(inputs ...int64) trace.SpanStartOption {
		return trace.WithAttributes(attribute.Int64("pico.conversation.id", int64(root.ID)), attribute.Int64Slice("pico.inputs", inputs))
	}
	for _, tc := range []struct {
		name, want string
		make       func(tr trace.Tracer)
	}{
		{"a turn with its invocation", "", func(tr trace.Tracer) {
			ctx, turn := tr.Start(ctx, "pico.turn", turnAttrs(int64(input)))
			_, inv := tr.Start(ctx, "pico.task.execute")
			inv.End()
			turn.End()
		}},
		{"an invocation under another invocation", "is under pico.task.execute", func(tr trace.Tracer) {
			ctx, outer := tr.Start(ctx, "pico.task.execute")
			_, inner := tr.Start(ctx, "pico.task.execute")
			inner.End()
			outer.End()
		}},
		{"a turn under a span", "a turn is a trace's root", func(tr trace.Tracer) {
			ctx, host := tr.Start(ctx, "host.request")
			_, turn := tr.Start(ctx, "pico.turn", turnAttrs(int64(input)))
			turn.End()
			host.End()
		}},
		{"a turn that ended with its input still running", `ended, but the input is "running"`, func(tr trace.Tracer) {
			_, turn := tr.Start(ctx, "pico.turn", turnAttrs(int64(running)))
			turn.End()
		}},
		{"a turn that ended for an input never accepted", `ended, but the input is ""`, func(tr trace.Tracer) {
			_, turn := tr.Start(ctx, "pico.turn", turnAttrs(999))
			turn.End()
		}},
		{"a turn in error for an input that is done", "in error exactly when its input failed", func(tr trace.Tracer) {
			_, turn := tr.Start(ctx, "pico.turn", turnAttrs(int64(input)))
			turn.SetStatus(codes.Error, "no")
			turn.End()
		}},
		{"a provider call that stopped on an error, not in error", "exactly when the answer stopped on one", func(tr trace.Tracer) {
			_, call := tr.Start(ctx, "pico.provider.call", trace.WithAttributes(attribute.String("gen_ai.response.finish_reason", "error")))
			call.End()
		}},
		{"a provider call in error that stopped", "exactly when the answer stopped on one", func(tr trace.Tracer) {
			_, call := tr.Start(ctx, "pico.provider.call", trace.WithAttributes(attribute.String("gen_ai.response.finish_reason", "stop")))
			call.SetStatus(codes.Error, "no")
			call.End()
		}},
		{"a provider call that stopped on an error, in error", "", func(tr trace.Tracer) {
			_, call := tr.Start(ctx, "pico.provider.call", trace.WithAttributes(attribute.String("gen_ai.response.finish_reason", "error")))
			call.SetStatus(codes.Error, "the provider refused")
			call.End()
		}},
		{"a generation that ran with no turn traced", "no turn was traced", func(tr trace.Tracer) {
			_, inv := tr.Start(ctx, "pico.task.execute", trace.WithAttributes(attribute.String("pico.task.kind", agent.GenerationKindName), attribute.Int64("pico.task.id", 7)))
			inv.End()
		}},
		{"a turn closed unfinished", "", func(tr trace.Tracer) {
			_, turn := tr.Start(ctx, "pico.turn", turnAttrs(999), trace.WithAttributes(attribute.Bool("pico.trace.unfinished", true)))
			turn.End()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunSpans(1)
			tc.make(r.tp.Tracer("test"))
			err := r.check(ctx, store)
			var oe *oracleError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("check = %v; want none", err)
			case tc.want != "" && (!errors.As(err, &oe) || oe.Rule != ruleSpanTree || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("check = %v; want the %s rule saying %q", err, ruleSpanTree, tc.want)
			}
		})
	}
	var nilSpans *runSpans // a seed that records none
	if err := nilSpans.check(ctx, store); err != nil {
		t.Fatal(err)
	}
}
