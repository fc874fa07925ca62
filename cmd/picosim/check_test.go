package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pico-go/pico/sim/fault"
)

// sessionOnDisk leaves a finished scenario's session files in a directory.
func sessionOnDisk(t *testing.T, name, backend string) string {
	t.Helper()
	dir := t.TempDir()
	sc, _ := findScenario(name)
	res, err := runScenarioIn(dir, runSpec{sc: sc, seed: 1, backend: backend, strategy: "random"}, nil)
	if err != nil || !res.OK {
		t.Fatalf("%s on %s: %v %s", name, backend, err, res.Error)
	}
	if backend == "jsonl" {
		return filepath.Join(dir, "session.jsonl")
	}
	return filepath.Join(dir, "sessions.db")
}

func TestCheckPassesValidSessionsAndNeverWrites(t *testing.T) {
	for _, backend := range []string{"jsonl", "sqlite"} {
		for _, name := range []string{"input-while-busy", "shutdown-queued", "crash-reopen"} {
			path := sessionOnDisk(t, name, backend)
			before, _ := os.ReadFile(path)
			var out, errOut bytes.Buffer
			if code := checkMain([]string{path}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "✓ ") {
				t.Fatalf("%s on %s: exit %d\n%s%s", name, backend, code, out.String(), errOut.String())
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatalf("%s on %s: check changed the session file", name, backend)
			}
		}
	}
}

// A session a torn crash cut mid-line, restarted and driven on, is valid.
func TestCheckPassesASessionRestartedAfterATornCrash(t *testing.T) {
	dir := t.TempDir()
	sc, _ := findScenario("input-while-busy")
	plan := fault.Plan{Faults: []fault.Fault{{Name: "torn", Kind: fault.Crash, Commit: 9, Tear: 3}}}
	res, err := runScenarioIn(dir, runSpec{sc: sc, seed: 2, backend: "jsonl", strategy: "random", plan: plan}, nil)
	if err != nil || !res.OK || !res.Recovered {
		t.Fatalf("%v %s (recovered %v)", err, res.Error, res.Recovered)
	}
	var out, errOut bytes.Buffer
	if code := checkMain([]string{filepath.Join(dir, "session.jsonl")}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

func TestCheckNamesTheOffendingLineOfACorruptedSession(t *testing.T) {
	path := sessionOnDisk(t, "parallel-tools", "jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(data, []byte("\n"))
	// Hand-edit line 4: its batch now claims ids that overlap the previous one.
	lines[3] = bytes.Replace(lines[3], []byte(`{"first":`), []byte(`{"first":1,"x":`), 1)
	if err := os.WriteFile(path, bytes.Join(lines, []byte("\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	var out, errOut bytes.Buffer
	code := checkMain([]string{path}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "line 4") || !strings.Contains(out.String(), path) {
		t.Fatalf("exit %d, %q; want exit 1 naming %s line 4", code, out.String(), path)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("check changed the corrupted file")
	}
	if code := checkMain([]string{filepath.Join(t.TempDir(), "missing.jsonl")}, &out, &errOut); code != 2 {
		t.Fatalf("a missing session: exit %d; want 2", code)
	}
}

// Each batch of a JSONL history is held to the harness's rules against the
// session before it: a hand-edited input result that moves backwards is
// named with its line and rule, though every batch still parses.
func TestCheckHoldsEveryBatchToTheHarnessRules(t *testing.T) {
	path := sessionOnDisk(t, "parallel-tools", "jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(data, []byte("\n"))
	edited := -1
	for i, l := range lines {
		if bytes.Contains(l, []byte(`"namespace":"pi.inputResult"`)) && bytes.Contains(l, []byte(`"status":"done"`)) {
			lines[i], edited = bytes.Replace(l, []byte(`"status":"done"`), []byte(`"status":"queued"`), 1), i
			break
		}
	}
	if edited < 0 {
		t.Fatal("the session has no finished input")
	}
	if err := os.WriteFile(path, bytes.Join(lines, []byte("\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := checkMain([]string{path}, &out, &errOut)
	want := fmt.Sprintf("%s: line %d: ", path, edited+1)
	if code != 1 || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "input-result-transition") || !strings.Contains(out.String(), "from running to queued") {
		t.Fatalf("exit %d, %q; want exit 1 naming %s and the input-result rule", code, out.String(), want)
	}
}
