package core_test

// Telemetry (DESIGN §9): one span per execute/recover/abort invocation and
// one per commit, each commit parented under the invocation that made it.

import (
	"context"
	"errors"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// spanTree indexes recorded spans for parent/child checks by span id.
type spanTree struct{ spans []sdktrace.ReadOnlySpan }

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// invocations returns the spans named name that carry task id.
func (st spanTree) invocations(name string, id storage.ID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range st.spans {
		if v, ok := attr(s, "pico.task.id"); ok && s.Name() == name && v.AsInt64() == int64(id) {
			out = append(out, s)
		}
	}
	return out
}

// commits returns the pico.commit spans whose parent is parent.
func (st spanTree) commits(parent sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range st.spans {
		if s.Name() == "pico.commit" && s.Parent().SpanID() == parent.SpanContext().SpanID() {
			out = append(out, s)
		}
	}
	return out
}

func openTraced(t testing.TB, ctx context.Context, s *sim.Sim, rec *tracetest.SpanRecorder, kinds ...core.TaskKind) *core.Harness {
	t.Helper()
	h, err := core.Open(ctx, memory.New(), core.Options{
		Runtime:        s.Runtime(),
		TaskKinds:      kinds,
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A task that commits twice and is then aborted: its execute span has the
// two commits as children, its abort span the settling commit.
func TestSpanTreeOfAnAbortedTask(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		rec := tracetest.NewSpanRecorder()
		up := rt.NewEvent("up")
		kind := simtest.StepKind("traced", func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			if err := patchTask(ctx, trt, task.ID, core.TaskPatch{State: map[string]int{"progress": 1}}); err != nil {
				return err
			}
			up.Set()
			return rt.NewEvent("never").Wait(ctx) // until the mark's signal
		})
		h := openTraced(t, ctx, s, rec, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		done := simtest.DriveInActor(ctx, s, h.Root(), nil)
		up.Wait(ctx)
		must(0, h.AbortTask(ctx, id))
		done.Wait(ctx)
		must(0, h.Close(ctx)) // every invocation has returned and ended its span

		tree := spanTree{rec.Ended()}
		execs, aborts := tree.invocations("pico.task.execute", id), tree.invocations("pico.task.abort", id)
		if len(execs) != 1 || len(aborts) != 1 || len(tree.invocations("pico.task.recover", id)) != 0 {
			t.Fatalf("task %d has %d execute, %d abort spans; want one each and no recover", id, len(execs), len(aborts))
		}
		for _, span := range []sdktrace.ReadOnlySpan{execs[0], aborts[0]} {
			if k, _ := attr(span, "pico.task.kind"); k.AsString() != "traced" {
				t.Fatalf("%s has pico.task.kind %q; want traced", span.Name(), k.AsString())
			}
		}
		if got := tree.commits(execs[0]); len(got) != 2 {
			t.Fatalf("execute span has %d commit children; want 2 (running patch, progress patch)", len(got))
		}
		settling := tree.commits(aborts[0])
		if len(settling) != 1 {
			t.Fatalf("abort span has %d commit children; want 1 (its settlement)", len(settling))
		}
		if n, _ := attr(settling[0], "pico.writes"); n.AsInt64() != 1 {
			t.Fatalf("the abort's commit has %d writes; want the one settle", n.AsInt64())
		}
		for _, span := range []sdktrace.ReadOnlySpan{execs[0], aborts[0]} {
			if span.SpanContext().TraceID() != tree.commits(span)[0].SpanContext().TraceID() {
				t.Fatalf("%s and its commits are in different traces", span.Name())
			}
		}
		// The host's mark and creation are commits of nobody's invocation.
		var orphans int
		for _, sp := range rec.Ended() {
			if sp.Name() == "pico.commit" && !sp.Parent().IsValid() {
				orphans++
			}
		}
		if orphans < 2 {
			t.Fatalf("%d parentless commits; want at least the host's create and mark", orphans)
		}
	})
}

// Each invocation of one task has its own span, and each span only the
// commits its invocation made.
func TestEveryInvocationHasItsOwnSpan(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rec := tracetest.NewSpanRecorder()
		kind := simtest.StepKind("cycle", nil)
		kind.ExecuteFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if err := patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
				return err
			}
			if attemptOf(task) == 0 {
				return patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "planned", State: map[string]int{"attempt": 1}})
			}
			return settleTask(ctx, rt, task.ID, "done", nil)
		}
		h := openTraced(t, ctx, s, rec, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		must(h.Root().Drive(ctx))
		must(0, h.Close(ctx))
		tree := spanTree{rec.Ended()}
		execs := tree.invocations("pico.task.execute", id)
		if len(execs) != 2 || execs[0].SpanContext().SpanID() == execs[1].SpanContext().SpanID() {
			t.Fatalf("%d execute spans; want two distinct ones", len(execs))
		}
		for i, span := range execs {
			if got := tree.commits(span); len(got) != 2 {
				t.Fatalf("execute %d has %d commit children; want 2", i, len(got))
			}
		}
	})
}

// The trace door (Tx.StartTrace, HomeTask, EndTrace): a rejected commit
// starts nothing; a homed task's invocations go under the trace while it
// is open; once it ended, the next invocation is a new root linked to it;
// every span carries the runtime's (virtual) time.
func TestATraceOpensWithItsCommitAndOutlivedWorkIsLinked(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rec := tracetest.NewSpanRecorder()
		kind := simtest.StepKind("homed", nil)
		kind.ExecuteFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if err := patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
				return err
			}
			if attemptOf(task) == 0 {
				_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
					tx.Patch(task.ID, core.TaskPatch{Status: "planned", State: map[string]int{"attempt": 1}})
					tx.EndTrace("work", nil)
					return nil
				})
				return err
			}
			return settleTask(ctx, rt, task.ID, "done", nil)
		}
		h := openTraced(t, ctx, s, rec, kind)
		_, err := h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			tx.StartTrace("refused", "refused")
			tx.Task(kind, core.TaskSpec{})
			return errors.New("the plan gives up")
		})
		if err == nil {
			t.Fatal("the refused plan committed")
		}
		opened := s.Now()
		var id storage.ID
		must(h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			id = tx.Task(kind, core.TaskSpec{})
			tx.StartTrace("work", "work", trace.WithAttributes(attribute.String("what", "test")))
			tx.HomeTask(id, "work")
			return nil
		}))
		must(h.Root().Drive(ctx))
		must(0, h.Close(ctx))

		tree := spanTree{rec.Ended()}
		var roots []sdktrace.ReadOnlySpan
		for _, sp := range tree.spans {
			switch sp.Name() {
			case "refused":
				t.Fatal("a rejected commit started its trace")
			case "work":
				roots = append(roots, sp)
			}
		}
		if len(roots) != 1 || roots[0].Parent().IsValid() {
			t.Fatalf("%d work traces; want one root", len(roots))
		}
		root := roots[0]
		if !root.StartTime().Equal(opened) {
			t.Fatalf("the trace started at %v; want the virtual time of its commit %v", root.StartTime(), opened)
		}
		if v, _ := attr(root, "pico.trace.unfinished"); v.AsBool() {
			t.Fatal("the trace its task ended is marked unfinished")
		}
		execs := tree.invocations("pico.task.execute", id)
		if len(execs) != 2 {
			t.Fatalf("%d execute spans; want 2", len(execs))
		}
		if execs[0].Parent().SpanID() != root.SpanContext().SpanID() {
			t.Fatal("the first execute is not under the open trace that homes its task")
		}
		second := execs[1]
		if second.Parent().IsValid() || second.SpanContext().TraceID() == root.SpanContext().TraceID() {
			t.Fatal("the execute after the trace ended is not a new root")
		}
		var home bool
		for _, l := range second.Links() {
			home = home || l.SpanContext.SpanID() == root.SpanContext().SpanID()
		}
		if !home {
			t.Fatalf("the execute after the trace ended links %v; want its ended home", second.Links())
		}
		if !execs[0].EndTime().Before(second.StartTime()) && !execs[0].EndTime().Equal(second.StartTime()) {
			t.Fatal("span times are not in the runtime's order")
		}
	})
}

// A trace still open when the session closes is ended then, marked
// unfinished, so an exporter gets it.
func TestAnOpenTraceEndsUnfinishedAtClose(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		rec := tracetest.NewSpanRecorder()
		h := openTraced(t, ctx, s, rec)
		must(h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			tx.StartTrace("open", "open")
			tx.SetValue(storage.SessionValue[int]("x").Address, 1)
			return nil
		}))
		for _, sp := range rec.Ended() {
			if sp.Name() == "open" {
				t.Fatal("the open trace ended before close")
			}
		}
		must(0, h.Close(ctx))
		for _, sp := range rec.Ended() {
			if sp.Name() == "open" {
				if v, _ := attr(sp, "pico.trace.unfinished"); !v.AsBool() {
					t.Fatal("the trace ended at close is not marked unfinished")
				}
				return
			}
		}
		t.Fatal("Close did not end the open trace")
	})
}

// HomeTask also homes a task that is already live, and a key started again
// after it ended is another trace: a task homed in the first goes on as a
// root of its own, never under the second.
func TestHomingALiveTaskAndAKeyStartedAgain(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		rec := tracetest.NewSpanRecorder()
		gate := s.Runtime().NewEvent("gate")
		kind := simtest.StepKind("gated", func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			return gate.Wait(ctx)
		})
		h := openTraced(t, ctx, s, rec, kind)
		live := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{After: nil})
		must(h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			tx.StartTrace("k", "first")
			tx.HomeTask(live, "k")
			tx.SetValue(storage.SessionValue[int]("x").Address, 0) // a commit with no writes opens nothing
			return nil
		}))
		must(h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			tx.EndTrace("k", nil)
			tx.StartTrace("k", "second")
			tx.SetValue(storage.SessionValue[int]("x").Address, 1)
			return nil
		}))
		done := simtest.DriveInActor(ctx, s, h.Root(), nil)
		gate.Set()
		done.Wait(ctx)
		must(0, h.Close(ctx))
		tree := spanTree{rec.Ended()}
		byName := map[string]sdktrace.ReadOnlySpan{}
		for _, sp := range tree.spans {
			byName[sp.Name()] = sp
		}
		execs := tree.invocations("pico.task.execute", live)
		if len(execs) == 0 || byName["first"] == nil || byName["second"] == nil {
			t.Fatalf("%d executes, traces %v", len(execs), byName)
		}
		for _, ex := range execs {
			if ex.Parent().SpanID() == byName["second"].SpanContext().SpanID() {
				t.Fatal("a task homed in the first trace under k went under the second")
			}
			var linked bool
			for _, l := range ex.Links() {
				linked = linked || l.SpanContext.SpanID() == byName["first"].SpanContext().SpanID()
			}
			if ex.Parent().IsValid() || !linked {
				t.Fatalf("execute parent %v links %v; want a root linked to its ended home", ex.Parent(), ex.Links())
			}
		}
	})
}
