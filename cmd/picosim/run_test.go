package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every scenario passes on every backend, the same seed gives the same
// trace whatever the backend, and different seeds explore different
// schedules.
func TestScenariosPassAndAreDeterministic(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			digests := map[string]bool{}
			for seed := uint64(1); seed <= 5; seed++ {
				var first string
				for _, backend := range []string{"memory", "jsonl", "sqlite"} {
					if backend != "memory" && seed > 2 {
						continue // the disk backends add files, not schedules
					}
					res, err := runScenario(sc, seed, backend, "random", nil)
					if err != nil || !res.OK {
						t.Fatalf("seed %d on %s: %v %s\n  reproduce: go run ./cmd/picosim run %s --seed %d --backend %s", seed, backend, err, res.Error, sc.name, seed, backend)
					}
					if first == "" {
						first = res.Digest
					} else if res.Digest != first {
						t.Fatalf("seed %d: %s's trace %s differs from memory's %s", seed, backend, res.Digest, first)
					}
				}
				again, _ := runScenario(sc, seed, "memory", "random", nil)
				if again.Digest != first {
					t.Fatalf("seed %d ran twice gives traces %s and %s", seed, first, again.Digest)
				}
				digests[first] = true
			}
			if len(digests) < 2 {
				t.Fatalf("five seeds gave %d distinct schedules", len(digests))
			}
		})
	}
}

func TestRunWritesIdenticalTracesForTheSameSeed(t *testing.T) {
	dir := t.TempDir()
	var traces [2][]byte
	for i := range traces {
		path := filepath.Join(dir, "trace"+string(rune('a'+i)))
		var out, errOut bytes.Buffer
		if code := runMain([]string{"input-while-busy", "--seed", "7", "--trace", path, "--json"}, &out, &errOut); code != 0 {
			t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
		}
		var res runResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil || !res.OK || res.Seed != 7 {
			t.Fatalf("result %s: %v", out.String(), err)
		}
		var err error
		if traces[i], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	if len(traces[0]) == 0 || !bytes.Equal(traces[0], traces[1]) {
		t.Fatalf("two runs of one seed wrote different traces (%d and %d bytes)", len(traces[0]), len(traces[1]))
	}
}

func TestRunAndListMistakesAreOneLineAndExitTwo(t *testing.T) {
	for _, args := range [][]string{{"nope"}, {"basic-turn", "--backend", "oracle"}, {"basic-turn", "--strategy", "chaos"}, {"basic-turn", "--seed", "x"}, {"basic-turn", "extra"}} {
		var out, errOut bytes.Buffer
		if code := runMain(args, &out, &errOut); code != 2 || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, errOut.String())
		}
	}
	var out bytes.Buffer
	listMain(&out)
	for _, sc := range scenarios {
		if !strings.Contains(out.String(), sc.name+" ") {
			t.Errorf("list lacks %s:\n%s", sc.name, out.String())
		}
	}
}
