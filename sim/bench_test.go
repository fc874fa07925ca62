package sim_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
)

// BenchmarkSchedulingDecisions measures how many scheduling decisions per
// second the simulator makes with eight actors yielding in a loop.
func BenchmarkSchedulingDecisions(b *testing.B) {
	const actors = 8
	s := sim.New(sim.Options{Seed: 1, StepsMax: b.N*actors + 1000})
	b.ResetTimer()
	err := s.Run(context.Background(), func(ctx context.Context) {
		rt := s.Runtime()
		done := rt.NewEvent("done")
		left := actors
		for i := range actors {
			rt.Go(ctx, fmt.Sprintf("a%d", i), func(ctx context.Context) {
				for range b.N {
					sim.Yield(ctx, "loop")
				}
				if left--; left == 0 {
					done.Set()
				}
			})
		}
		done.Wait(ctx)
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(s.Steps())/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(s.Steps()), "ns/decision")
}

// BenchmarkActorSwitch measures one hand-off between two actors in strict
// ping-pong: each waits for its own event and sets the other's, so every
// scheduling decision moves the baton to the other goroutine.
func BenchmarkActorSwitch(b *testing.B) {
	s := sim.New(sim.Options{Seed: 1, StepsMax: 4*b.N + 1000})
	b.ResetTimer()
	err := s.Run(context.Background(), func(ctx context.Context) {
		rt := s.Runtime()
		events := make([]core.Event, 2*b.N+2)
		for i := range events {
			events[i] = rt.NewEvent("e")
		}
		done := rt.NewEvent("done")
		for id := range 2 {
			rt.Go(ctx, fmt.Sprintf("p%d", id), func(ctx context.Context) {
				for k := id; k < 2*b.N; k += 2 {
					events[k].Wait(ctx)
					events[k+1].Set()
				}
				done.Set()
			})
		}
		events[0].Set()
		done.Wait(ctx)
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(s.Steps()), "ns/switch")
}
