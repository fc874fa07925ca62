package kit

import (
	"context"
	"flag"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the scenarios' expected outcomes")

const scenarioDir = "../../fixtures/scenarios"

// Every data scenario's outcome on this implementation is the journal its
// file holds; -update rewrites the journals.
func TestScenarios(t *testing.T) {
	scs, err := LoadScenarios(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scs {
		t.Run(sc.Name, func(t *testing.T) {
			out, err := Run(context.Background(), sc, 1)
			if err != nil {
				t.Fatal(err)
			}
			got := Journal(out)
			if *update {
				if err := sc.Write(got); err != nil {
					t.Fatal(err)
				}
				return
			}
			d, err := Diff(got, sc.Expected)
			if err != nil {
				t.Fatalf("%s: %v (go test ./conformance/... -update)", filepath.Base(sc.Path), err)
			}
			if d != nil {
				t.Fatalf("scenario %s: %s (if intended: go test ./conformance/... -update)", sc.Name, d)
			}
		})
	}
}

// A scenario's outcome is a function of its script: other schedules of the
// same run (other seeds of the simulated runtime) give the same journal,
// so a port, which schedules its own way, can reproduce it.
func TestOutcomesDoNotDependOnTheSchedule(t *testing.T) {
	scs, err := LoadScenarios(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scs {
		t.Run(sc.Name, func(t *testing.T) {
			first, err := Run(context.Background(), sc, 1)
			if err != nil {
				t.Fatal(err)
			}
			for seed := uint64(2); seed <= 6; seed++ {
				out, err := Run(context.Background(), sc, seed)
				if err != nil {
					t.Fatal(err)
				}
				if d, _ := Diff(Journal(out), Journal(first)); d != nil {
					t.Fatalf("seed %d differs from seed 1: %s", seed, d)
				}
			}
		})
	}
}
