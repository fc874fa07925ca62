package main

import (
	"context"
	"testing"
)

func BenchmarkTmpBasicTurn(b *testing.B) {
	sc, _ := findScenario("basic-turn")
	res, _ := runScenario(context.Background(), runSpec{sc: sc, seed: 1, backend: "memory", strategy: "random"}, nil)
	for i := range b.N {
		spec := fuzzSpec(sc, uint64(i+1), "memory", res.Batches)
		if res, err := runScenario(context.Background(), spec, nil); err != nil || !res.OK {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}
