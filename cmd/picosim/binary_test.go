package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// picosimBinary builds the command once per test run.
func picosimBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "picosim")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// run runs the binary and returns stdout, stderr and the exit code.
func runBinary(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errOut.String(), 0
	case errors.As(err, &exit):
		return out.String(), errOut.String(), exit.ExitCode()
	}
	t.Fatalf("%v: %v", args, err)
	return "", "", -1
}

// The built binary, as people and CI use it: deterministic traces, replay,
// help text (golden) and one-line mistakes.
func TestTheBinary(t *testing.T) {
	bin := picosimBinary(t)
	dir := t.TempDir()
	var traces [2][]byte
	for i := range traces {
		path := filepath.Join(dir, "t"+string(rune('0'+i)))
		if out, errOut, code := runBinary(t, bin, "run", "input-while-busy", "--seed", "11", "--backend", "sqlite", "--trace", path); code != 0 {
			t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
		}
		traces[i], _ = os.ReadFile(path)
	}
	if len(traces[0]) == 0 || !bytes.Equal(traces[0], traces[1]) {
		t.Fatal("two runs of one seed wrote different traces")
	}
	if out, _, code := runBinary(t, bin, "replay", filepath.Join(dir, "t0")); code != 0 || out != "identical\n" {
		t.Fatalf("replay: exit %d, %q", code, out)
	}
	// The README's main command: the whole suite, ending with DONE.
	if out, errOut, code := runBinary(t, bin); code != 0 || !strings.Contains(out, "\nDONE 8 scenarios, 400 runs (each replayed), 0 failures in ") {
		t.Fatalf("picosim with no arguments: exit %d\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{{"nope"}, {"run", "nope"}, {"run", "basic-turn", "--backend", "x"}, {"replay", filepath.Join(dir, "missing")}, {"bench", "--tools", "7"}} {
		out, errOut, code := runBinary(t, bin, args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "goroutine") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line on stderr", args, code, out, errOut)
		}
	}
	for _, c := range []struct {
		golden string
		args   []string
	}{
		{"help", []string{"help"}},
		{"run-help", []string{"run", "--help"}},
		{"replay-help", []string{"replay", "--help"}},
		{"bench-help", []string{"bench", "--help"}},
		{"fuzz-help", []string{"fuzz", "--help"}},
		{"check-help", []string{"check", "--help"}},
	} {
		out, errOut, code := runBinary(t, bin, c.args...)
		if code != 0 {
			t.Errorf("%v: exit %d, %s", c.args, code, errOut)
			continue
		}
		golden := filepath.Join("testdata", c.golden+".golden")
		if *update {
			if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (go test ./cmd/picosim -update creates it)", err)
		}
		if out != string(want) {
			t.Errorf("%v printed:\n%s\nwant:\n%s\n(if intended: go test ./cmd/picosim -update)", c.args, out, want)
		}
	}
}
