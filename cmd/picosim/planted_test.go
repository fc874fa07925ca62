//go:build planted

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/pico-go/pico/internal/plant"
)

// TestPlantedBugs runs picosim fuzz over 1,000 seeds (its defaults: every
// scenario, memory, every fourth seed JSONL, every sixteenth SQLite) against each
// planted bug in turn, and fails unless every one is found. It logs a table:
// the bug, the seed of the first failure, the scenario, and the smallest
// case (a generated program's lines, or the host actions left).
//
//	go test -tags planted ./cmd/picosim -run TestPlantedBugs -v -timeout 60m
func TestPlantedBugs(t *testing.T) {
	var table strings.Builder
	fmt.Fprintf(&table, "| bug | found at seed | scenario | smallest case | generated programs alone |\n|---|---|---|---|---|\n")
	missed := 0
	for _, name := range plant.Names() {
		t.Setenv("PICO_PLANT", name)
		var out bytes.Buffer
		args := []string{"--seeds", "1000", "--fail-fast", "--json", "--out", t.TempDir()}
		fuzzMain(context.Background(), args, &out, io.Discard)
		var sum fuzzSummary
		if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
			t.Fatalf("%s: fuzz printed %q: %v", name, out.String(), err)
		}
		if len(sum.Failures) == 0 {
			missed++
			fmt.Fprintf(&table, "| %s | not found in %d runs | | | |\n", name, sum.Runs)
			continue
		}
		f := sum.Failures[0]
		for _, trace := range []string{f.Trace, f.SmallestTrace} {
			if diff, err := replay(context.Background(), trace); err != nil || diff != "" {
				t.Errorf("%s: replaying %s: %v %s", name, trace, err, diff)
			}
		}
		small := "the whole scenario"
		if _, drop, ok := strings.Cut(f.Smallest, "--drop "); ok {
			small = fmt.Sprintf("%d host actions left out", strings.Count(strings.Fields(drop)[0], ",")+1)
		}
		if f.Program != "" {
			data, err := os.ReadFile(f.Program)
			if err != nil {
				t.Fatal(err)
			}
			p, err := parseProgram(string(data))
			if err != nil {
				t.Fatal(err)
			}
			small = fmt.Sprintf("a program of %d lines", len(p.lines))
		}
		gen := "not found in 1000 seeds"
		var gout bytes.Buffer
		fuzzMain(context.Background(), append([]string{"generated"}, args...), &gout, io.Discard)
		var gsum fuzzSummary
		if err := json.Unmarshal(gout.Bytes(), &gsum); err == nil && len(gsum.Failures) > 0 {
			gen = fmt.Sprintf("seed %d", gsum.Failures[0].Seed)
			if p := gsum.Failures[0].Program; p != "" {
				if data, err := os.ReadFile(p); err == nil {
					if prog, err := parseProgram(string(data)); err == nil {
						gen += fmt.Sprintf(", shrunk to %d lines", len(prog.lines))
					}
				}
			}
		}
		fmt.Fprintf(&table, "| %s | %d | %s | %s | %s |\n", name, f.Seed, f.Scenario, small, gen)
	}
	t.Log("\n" + table.String())
	if missed > 0 {
		t.Fatalf("%d planted bugs were not found", missed)
	}
}
