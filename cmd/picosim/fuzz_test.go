package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// With a planted bug that only some schedules hit, fuzz finds it, writes
// the failing trace, shrinks it, and prints a command that fails the same way.
func TestFuzzFindsShrinksAndReproducesAPlantedBug(t *testing.T) {
	t.Setenv(plantedEnv, "tool-order")
	out := filepath.Join(t.TempDir(), "failures")
	var stdout, stderr bytes.Buffer
	if code := fuzzMain([]string{"parallel-tools", "--seeds", "12", "--workers", "2", "--out", out, "--fail-fast"}, &stdout, &stderr); code != 1 {
		t.Fatalf("fuzz: exit %d; want 1\n%s%s", code, stdout.String(), stderr.String())
	}
	m := regexp.MustCompile(`smallest: picosim run (parallel-tools --seed \d+ --strategy pct:\d+:\d+ --backend memory)`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no shrunk reproduce command in:\n%s", stdout.String())
	}
	traces, _ := filepath.Glob(filepath.Join(out, "parallel-tools-seed*.jsonl"))
	if len(traces) == 0 {
		t.Fatalf("no failure trace written to %s", out)
	}
	var again bytes.Buffer
	if code := runMain(strings.Fields(m[1]), &again, &stderr); code != 1 || !strings.Contains(again.String(), "planted bug: tool b ran before tool a") {
		t.Fatalf("the printed command %q: exit %d, %q; want the same failure", m[1], code, again.String())
	}
	var replayed bytes.Buffer
	if code := replayMain([]string{traces[0]}, &replayed, &stderr); code != 0 {
		t.Fatalf("replaying the failure trace: %s%s", replayed.String(), stderr.String())
	}
}

func TestFuzzWithoutBugsPassesAndMistakesExitTwo(t *testing.T) {
	t.Setenv(plantedEnv, "")
	var stdout, stderr bytes.Buffer
	if code := fuzzMain([]string{"--seeds", "4", "--out", t.TempDir()}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "DONE 32 runs over 8 scenarios, 0 failures") {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	for _, args := range [][]string{{"nope"}, {"--workers", "0"}, {"--backend", "x"}, {"--seeds", "x"}} {
		stderr.Reset()
		if code := fuzzMain(args, &stdout, &stderr); code != 2 || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line", args, code, stderr.String())
		}
	}
}
