package agent_test

// Telemetry of a turn (DESIGN §9): one trace per input group, from its
// acceptance to its terminal results, with every invocation of the turn's
// tasks, the provider calls, tool handlers, hooks and commits under it;
// the next turn is a trace of its own, linked to what formed it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
)

// spans indexes recorded spans by id.
type spans struct {
	all  []sdktrace.ReadOnlySpan
	byID map[trace.SpanID]sdktrace.ReadOnlySpan
}

func indexSpans(all []sdktrace.ReadOnlySpan) spans {
	s := spans{all: all, byID: map[trace.SpanID]sdktrace.ReadOnlySpan{}}
	for _, sp := range all {
		s.byID[sp.SpanContext().SpanID()] = sp
	}
	return s
}

func spanAttr(sp sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// named returns the spans called name whose attributes include every
// key=value of match (values compared as their string forms).
func (s spans) named(name string, match ...string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
next:
	for _, sp := range s.all {
		if sp.Name() != name {
			continue
		}
		for _, m := range match {
			k, v, _ := strings.Cut(m, "=")
			if spanAttr(sp, k).Emit() != v {
				continue next
			}
		}
		out = append(out, sp)
	}
	return out
}

func (s spans) parent(sp sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	return s.byID[sp.Parent().SpanID()]
}

// describe names a span for failure messages.
func describe(sp sdktrace.ReadOnlySpan) string {
	if sp == nil {
		return "<none>"
	}
	var b strings.Builder
	b.WriteString(sp.Name())
	for _, k := range []string{"pico.task.kind", "pico.task.id", "pico.attempt", "gen_ai.tool.name", "pico.hook.point", "pico.batch"} {
		if v := spanAttr(sp, k); v.Type() != attribute.INVALID {
			fmt.Fprintf(&b, " %s=%s", k, v.Emit())
		}
	}
	return b.String()
}

// linkedTo reports whether sp has a link to target.
func linkedTo(sp, target sdktrace.ReadOnlySpan) bool {
	for _, l := range sp.Links() {
		if l.SpanContext.SpanID() == target.SpanContext().SpanID() {
			return true
		}
	}
	return false
}

// One turn with a rate-limited first attempt and a tool call, and a
// followUp queued during it: the first turn's spans form one tree under
// its pico.turn root, exactly; the followUp is a second trace whose root
// and first invocation link back to the first turn's last generation.
func TestATurnIsOneTraceWithItsToolAndRetryUnderIt(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		path := filepath.Join(t.TempDir(), "s.jsonl")
		store := must(jsonl.Open(ctx, path, jsonl.Options{}))
		var nested struct {
			task   storage.ID
			same   bool
			commit trace.SpanID
		}
		probe := toolFunc("probe", func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			// A ctx derived inside the handler keeps the task's identity
			// and the telemetry parent: its commit is the task's own and
			// lands under the handler's span.
			cctx, cancel := context.WithCancel(context.WithValue(ctx, struct{ k string }{"x"}, 1))
			defer cancel()
			inv, ok := core.InvocationOf(cctx)
			nested.task, nested.same = inv.Task, ok
			_, err := rt.Commit(cctx, func(tx *core.ConversationTx) error {
				tx.SetValue(storage.SessionValue[string]("probe.seen").Address, "yes")
				return nil
			})
			out.Write("probed")
			return err
		})
		a := openAgent(t, ctx, s, agentOptions{store: store, tools: []agent.Tool{probe}, tracer: tp})
		a.h.Hooks().On(agent.ToolKind, agent.HookBeforeTool, core.Hook(func(ctx context.Context, in agent.BeforeToolInput) (agent.BeforeToolOutput, error) {
			return agent.BeforeToolOutput{}, nil
		}), core.HookOptions{})
		a.faux.SetResponses(
			faux.RateLimited(),
			faux.Reply(faux.ToolCall("call-1", "probe", `{}`)).WithStop("toolUse"),
			answer("first done"),
			answer("second done"),
		)
		host := tp.Tracer("host")
		hctx, hostSpan := host.Start(ctx, "host.request")
		c := a.h.Root()
		first := must(c.Accept(hctx, userText("one"), agent.AcceptOptions{}))
		queuedAt := s.Now()
		second := must(c.FollowUp(hctx, userText("two")))
		hostSpan.End()
		must(c.Drive(ctx))
		for _, in := range []storage.ID{first, second} {
			if r, _ := must2(c.Result(ctx, in)); r.Status != agent.InputDone {
				t.Fatalf("input %d is %s; want done", in, r.Status)
			}
		}
		must(0, a.h.Close(ctx))
		st := indexSpans(rec.Ended())

		turns := st.named("pico.turn")
		if len(turns) != 2 {
			t.Fatalf("%d pico.turn spans; want 2 (the turn and its followUp)", len(turns))
		}
		slices.SortFunc(turns, func(x, y sdktrace.ReadOnlySpan) int { return x.StartTime().Compare(y.StartTime()) })
		turn1, turn2 := turns[0], turns[1]
		for i, tr := range turns {
			if tr.Parent().IsValid() {
				t.Fatalf("turn %d has a parent %s; a turn is a trace's root", i+1, describe(st.parent(tr)))
			}
		}
		for i, tr := range turns {
			if spanAttr(tr, "pico.trace.unfinished").AsBool() {
				t.Fatalf("turn %d was ended by Close, not by its input's terminal result", i+1)
			}
		}
		if got := spanAttr(turn1, "pico.inputs").AsInt64Slice(); !slices.Equal(got, []int64{int64(first)}) {
			t.Fatalf("turn 1 inputs %v; want [%d]", got, first)
		}
		if !linkedTo(turn1, hostSpan.(sdktrace.ReadOnlySpan)) {
			t.Fatalf("turn 1 is not linked to the host request that accepted it")
		}

		// Everything of turn 1's trace: exact parents.
		in1 := func(sp sdktrace.ReadOnlySpan) bool {
			return sp.SpanContext().TraceID() == turn1.SpanContext().TraceID()
		}
		var gens, tools, posts []sdktrace.ReadOnlySpan
		for _, sp := range st.all {
			if !in1(sp) || !strings.HasPrefix(sp.Name(), "pico.task.") {
				continue
			}
			if p := st.parent(sp); p != turn1 {
				t.Fatalf("%s has parent %s; want turn 1", describe(sp), describe(p))
			}
			switch spanAttr(sp, "pico.task.kind").AsString() {
			case agent.GenerationKindName:
				gens = append(gens, sp)
			case agent.ToolKindName:
				tools = append(tools, sp)
			case agent.PostToolsKindName:
				posts = append(posts, sp)
			}
		}
		// The generation that was rate limited runs twice (its retry is a
		// second execute of the same task), then post_tools' successor.
		if len(gens) != 3 || len(tools) != 1 || len(posts) != 1 {
			t.Fatalf("turn 1 has %d generation, %d tool, %d post_tools invocations; want 3, 1, 1", len(gens), len(tools), len(posts))
		}
		providers := st.named("pico.provider.call")
		var p1 []sdktrace.ReadOnlySpan
		for _, sp := range providers {
			if in1(sp) {
				p1 = append(p1, sp)
				if k := spanAttr(st.parent(sp), "pico.task.kind").AsString(); k != agent.GenerationKindName {
					t.Fatalf("%s is under %s; want a generation invocation", describe(sp), describe(st.parent(sp)))
				}
				if m := spanAttr(sp, "gen_ai.request.model").AsString(); m == "" {
					t.Fatalf("%s has no model attribute", describe(sp))
				}
			}
		}
		if len(p1) != 3 {
			t.Fatalf("turn 1 has %d provider calls; want 3 (rate limited, tool call, answer)", len(p1))
		}
		slices.SortFunc(p1, func(x, y sdktrace.ReadOnlySpan) int { return x.StartTime().Compare(y.StartTime()) })
		if p1[0].Status().Code != codes.Error || spanAttr(p1[0], "pico.attempt").AsInt64() != 1 {
			t.Fatalf("the first call is %s status %v; want attempt 1 in error", describe(p1[0]), p1[0].Status())
		}
		if spanAttr(p1[1], "pico.attempt").AsInt64() != 2 || st.parent(p1[1]) == st.parent(p1[0]) {
			t.Fatalf("the retry is %s under %s; want attempt 2 in the generation's second invocation", describe(p1[1]), describe(st.parent(p1[1])))
		}
		if p1[1].Status().Code == codes.Error || spanAttr(p1[1], "gen_ai.response.finish_reason").AsString() != "toolUse" {
			t.Fatalf("the retry ended %v, %s; want ok with toolUse", p1[1].Status(), spanAttr(p1[1], "gen_ai.response.finish_reason").Emit())
		}
		if spanAttr(p1[2], "gen_ai.usage.output_tokens").Type() == attribute.INVALID {
			t.Fatalf("the answering call has no usage attributes: %v", p1[2].Attributes())
		}
		toolCalls := st.named("pico.tool.call", "gen_ai.tool.name=probe")
		if len(toolCalls) != 1 || st.parent(toolCalls[0]) != tools[0] {
			t.Fatalf("tool handler spans %d; want one under the tool invocation", len(toolCalls))
		}
		hooks := st.named("pico.hook", "pico.hook.point="+agent.HookBeforeTool)
		if len(hooks) != 1 || st.parent(hooks[0]) != tools[0] {
			t.Fatalf("before_tool hook spans %d; want one under the tool invocation", len(hooks))
		}
		// Every commit of turn 1 is under one of its invocations or the
		// handler; the host's acceptance is under the host request.
		for _, sp := range st.named("pico.commit") {
			p := st.parent(sp)
			switch {
			case in1(sp):
				if p == nil || !(strings.HasPrefix(p.Name(), "pico.task.") || p.Name() == "pico.tool.call" || p.Name() == "pico.provider.call") {
					t.Fatalf("turn 1 commit %s is under %s", describe(sp), describe(p))
				}
			case p != nil && p.Name() == "host.request":
			case p == nil:
			default:
				if !(strings.HasPrefix(p.Name(), "pico.task.") || p.Name() == "pico.provider.call") || p.SpanContext().TraceID() != sp.SpanContext().TraceID() {
					t.Fatalf("commit %s is under %s", describe(sp), describe(p))
				}
			}
		}
		if !nested.same || nested.task != storage.ID(spanAttr(tools[0], "pico.task.id").AsInt64()) {
			t.Fatalf("the nested ctx is invocation of task %d (%v); want the tool task %d", nested.task, nested.same, spanAttr(tools[0], "pico.task.id").AsInt64())
		}
		var underHandler int
		for _, sp := range st.named("pico.commit") {
			if st.parent(sp) == toolCalls[0] {
				underHandler++
			}
		}
		if underHandler != 1 {
			t.Fatalf("%d commits under the tool handler; want the one made with the nested ctx", underHandler)
		}

		// Turn 2 formed in the commit that ended turn 1: a trace of its
		// own, linked to the invocation that formed it; its generation is
		// under it and links the same cause.
		slices.SortFunc(gens, func(x, y sdktrace.ReadOnlySpan) int { return x.StartTime().Compare(y.StartTime()) })
		last := gens[len(gens)-1]
		if turn2.SpanContext().TraceID() == turn1.SpanContext().TraceID() || !linkedTo(turn2, last) {
			t.Fatalf("turn 2 is in trace %v linked %v; want its own trace, linked to %s", turn2.SpanContext().TraceID(), turn2.Links(), describe(last))
		}
		if got := spanAttr(turn2, "pico.inputs").AsInt64Slice(); !slices.Equal(got, []int64{int64(second)}) {
			t.Fatalf("turn 2 inputs %v; want [%d]", got, second)
		}
		var gen2 []sdktrace.ReadOnlySpan
		for _, sp := range st.named("pico.task.execute", "pico.task.kind="+agent.GenerationKindName) {
			if sp.SpanContext().TraceID() == turn2.SpanContext().TraceID() {
				gen2 = append(gen2, sp)
			}
		}
		if len(gen2) != 1 || st.parent(gen2[0]) != turn2 || !linkedTo(gen2[0], last) {
			t.Fatalf("turn 2 generations %d; want one under turn 2, linked to turn 1's last generation", len(gen2))
		}
		if turn2.StartTime().After(gen2[0].StartTime()) || turn1.EndTime().Before(p1[2].EndTime()) {
			t.Fatalf("a turn does not cover its work: turn 1 ends %v before its last call ends %v", turn1.EndTime(), p1[2].EndTime())
		}
		// The queued followUp's turn starts at its acceptance, while turn 1
		// still ran, not when its group formed.
		if !turn2.StartTime().Equal(queuedAt) || !turn2.StartTime().Before(turn1.EndTime()) {
			t.Fatalf("turn 2 starts at %v; want its acceptance at %v, before turn 1 ends at %v", turn2.StartTime(), queuedAt, turn1.EndTime())
		}

		// No span is stored in session data.
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range st.all {
			for _, id := range []string{sp.SpanContext().TraceID().String(), sp.SpanContext().SpanID().String()} {
				if bytes.Contains(data, []byte(id)) {
					t.Fatalf("the session file holds span id %s of %s", id, describe(sp))
				}
			}
		}
	})
}

// A turn whose input fails ends its trace in error, with the failure.
func TestAFailedTurnsTraceEndsInError(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		rec := tracetest.NewSpanRecorder()
		a := openAgent(t, ctx, s, agentOptions{tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
		a.faux.SetResponses(faux.Reply().WithError("boom"))
		c := a.h.Root()
		if _, err := c.Prompt(ctx, userText("hi"), agent.AcceptOptions{}); err == nil {
			t.Fatal("the prompt answered; want its input failed")
		}
		must(0, a.h.Close(ctx))
		turns := indexSpans(rec.Ended()).named("pico.turn")
		if len(turns) != 1 || turns[0].Status().Code != codes.Error || spanAttr(turns[0], "pico.trace.unfinished").AsBool() {
			t.Fatalf("turns %d; want one, ended in error by its failed input (not by Close)", len(turns))
		}
	})
}
