package agent_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage/memory"
)

// The peer's workload (shared/peer/bench.mjs): each turn sends one input
// "tool:a,b"; the model answers with one call per tool, the tools run, and
// the model answers with text.
const (
	fauxTurnsBench = 2000
	// turnWindowBench is how many turns each latency window averages, so a
	// single scheduling hiccup does not decide the comparison.
	turnWindowBench = 20
)

// fauxScript queues the answers of turns turns: calls after a user input,
// text after tool results. Call ids are unique per call. (A step function
// runs inside the provider's Stream, so it cannot queue more steps itself.)
func fauxScript(p *faux.Provider, turns int) {
	n := 0
	step := faux.Respond(func(req ai.Request) (faux.Step, error) {
		n++
		// Usage as the peer's provider reports it: 50 input tokens per
		// message, so the provider's own cost stays flat.
		in := int64(len(req.Messages) * 50)
		usage := ai.Usage{Input: in, Output: 2, TotalTokens: in + 2}
		last := req.Messages[len(req.Messages)-1]
		if last.Role == ai.RoleToolResult {
			return faux.Reply(faux.Text("after tools")).WithUsage(usage), nil
		}
		return faux.Reply(
			faux.ToolCall(fmt.Sprintf("call_%d_0", n), "a", `{"v":"a"}`),
			faux.ToolCall(fmt.Sprintf("call_%d_1", n), "b", `{"v":"b"}`),
		).WithStop(ai.StopToolUse).WithUsage(usage), nil
	})
	steps := make([]faux.Step, 2*turns)
	for i := range steps {
		steps[i] = step
	}
	p.SetResponses(steps...)
}

// runFauxTurns runs the workload on a fresh memory session and returns the
// duration of every turn.
func runFauxTurns(b *testing.B, ctx context.Context, rt core.Runtime, rng *rand.Rand, turns int) []time.Duration {
	p := must(faux.New(rt, rng, faux.Options{DiscardRequests: true}))
	fauxScript(p, turns)
	h, err := agent.Open(ctx, memory.New(), agent.Options{
		Runtime: rt, Tools: []agent.Tool{echoTool("a"), echoTool("b")},
		Models: agent.NewModels(agent.ModelSource{Provider: p, Models: p.Models()}),
	})
	if err != nil {
		b.Fatal(err)
	}
	c := h.Root()
	lat := make([]time.Duration, turns)
	for i := range turns {
		start := time.Now()
		got, err := c.Prompt(ctx, ai.PlainText("tool:a,b"), agent.AcceptOptions{})
		if err != nil || got == nil {
			b.Fatalf("turn %d: %v (answer %v)", i, err, got)
		}
		lat[i] = time.Since(start)
	}
	if err := h.Close(ctx); err != nil {
		b.Fatal(err)
	}
	return lat
}

func reportTurns(b *testing.B, lat []time.Duration, elapsed time.Duration, before, after *runtime.MemStats) {
	turns := len(lat) * b.N
	b.ReportMetric(float64(turns)/elapsed.Seconds(), "turns/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(turns), "allocs/turn")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(turns), "B/turn")
	window := func(from int) float64 {
		var sum time.Duration
		for _, d := range lat[from : from+turnWindowBench] {
			sum += d
		}
		return float64(sum.Microseconds()) / turnWindowBench
	}
	b.ReportMetric(window(10), "µs/turn@20")
	b.ReportMetric(window(len(lat)-turnWindowBench), "µs/turn@2000")
}

// BenchmarkFauxTurns runs 2,000 faux turns (input, two tool calls, final
// answer) on memory storage under the real runtime.
func BenchmarkFauxTurns(b *testing.B) {
	ctx := context.Background()
	var lat []time.Duration
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for range b.N {
		lat = runFauxTurns(b, ctx, core.RealRuntime(), rand.New(rand.NewPCG(1, 2)), fauxTurnsBench)
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	reportTurns(b, lat, elapsed, &before, &after)
}

// BenchmarkFauxTurnsSim is the same workload under the simulated runtime:
// the cost of determinism.
func BenchmarkFauxTurnsSim(b *testing.B) {
	var lat []time.Duration
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for i := range b.N {
		s := sim.New(sim.Options{Seed: uint64(i + 1), StepsMax: 1 << 62})
		if err := s.Run(context.Background(), func(ctx context.Context) {
			lat = runFauxTurns(b, ctx, s.Runtime(), s.Rand(), fauxTurnsBench)
		}); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	reportTurns(b, lat, elapsed, &before, &after)
}
