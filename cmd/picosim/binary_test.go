package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// A build of the command, made once per test process and shared by the
// tests that run it.
type build struct {
	once sync.Once
	bin  string
	err  error
}

var (
	withCgo, withoutCgo build
	// buildDir holds the builds; TestMain removes it.
	buildDir string
)

// TestMain runs the tests' simulations with picosim's collector target;
// the benchmarks of the harness itself put Go's default back.
func TestMain(m *testing.M) {
	setGCPercent(simGCPercent)
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// picosimBinary builds the command once per test run.
func picosimBinary(t *testing.T) string { return withCgo.get(t, "picosim") }

// picosimBinaryWithoutCgo builds it as a machine without a C toolchain
// does: the SQLite driver is a stub.
func picosimBinaryWithoutCgo(t *testing.T) string {
	return withoutCgo.get(t, "picosim-nocgo", "CGO_ENABLED=0")
}

func (b *build) get(t *testing.T, name string, env ...string) string {
	t.Helper()
	b.once.Do(func() {
		if buildDir == "" {
			if buildDir, b.err = os.MkdirTemp("", "picosim-test-bin-"); b.err != nil {
				return
			}
		}
		b.bin = filepath.Join(buildDir, name)
		cmd := exec.Command("go", "build", "-o", b.bin, ".")
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// runBinary runs the binary and returns stdout, stderr and the exit code.
func runBinary(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	return runBinaryEnv(t, bin, nil, args...)
}

// runBinaryEnv is runBinary with variables added to the environment.
func runBinaryEnv(t *testing.T, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
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
	// Every golden trace replays identically; an edited one names its first
	// differing line with both versions and exits 1.
	goldens, _ := filepath.Glob(filepath.Join("..", "..", "fixtures", "traces", "*.jsonl"))
	if len(goldens) != 2*len(scenarios) {
		t.Fatalf("%d golden traces; want two per scenario", len(goldens))
	}
	for _, g := range goldens {
		if out, errOut, code := runBinary(t, bin, "replay", g); code != 0 || out != "identical\n" {
			t.Errorf("replay %s: exit %d, %q %s", g, code, out, errOut)
		}
	}
	edited := filepath.Join(dir, "edited")
	lines := bytes.Split(traces[0], []byte("\n"))
	lines[9] = bytes.Replace(lines[9], []byte(`"step":`), []byte(`"step":1e9,"was":`), 1)
	if err := os.WriteFile(edited, bytes.Join(lines, []byte("\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, code := runBinary(t, bin, "replay", edited); code != 1 || !strings.HasPrefix(out, "line 10 differs\n  trace:  "+string(lines[9])+"\n  replay: ") {
		t.Fatalf("replay of an edited trace: exit %d, %q; want line 10 named with both versions", code, out)
	}
	// check: a valid session passes, a hand-corrupted one names its line.
	session := filepath.Join(dir, "session")
	if err := os.Mkdir(session, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runBinary(t, bin, "run", "parallel-tools", "--backend", "jsonl", "--keep", session); code != 0 {
		t.Fatalf("run --keep: exit %d\n%s%s", code, out, errOut)
	}
	file := filepath.Join(session, "session.jsonl")
	if out, _, code := runBinary(t, bin, "check", file); code != 0 || !strings.HasPrefix(out, "✓ "+file+": ") {
		t.Fatalf("check of a valid session: exit %d, %q", code, out)
	}
	data, _ := os.ReadFile(file)
	rows := bytes.Split(data, []byte("\n"))
	rows[2] = bytes.Replace(rows[2], []byte(`{"first":`), []byte(`{"first":1,"x":`), 1)
	if err := os.WriteFile(file, bytes.Join(rows, []byte("\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, code := runBinary(t, bin, "check", file); code != 1 || !strings.Contains(out, file) || !strings.Contains(out, "line 3") {
		t.Fatalf("check of a corrupted session: exit %d, %q; want exit 1 naming %s line 3", code, out, file)
	}
	// fuzz finds a planted bug, shrinks it, and its command fails the same way.
	fuzz := exec.Command(bin, "fuzz", "parallel-tools", "--seeds", "12", "--fail-fast", "--out", filepath.Join(dir, "failures"))
	fuzz.Env = append(os.Environ(), plantedEnv+"=tool-order")
	found, _ := fuzz.Output()
	m := regexp.MustCompile(`(?m)^  smallest: (.*)\n    fails with: (.*)$`).FindStringSubmatch(string(found))
	if fuzz.ProcessState.ExitCode() != 1 || m == nil {
		t.Fatalf("fuzz with a planted bug: exit %d\n%s", fuzz.ProcessState.ExitCode(), found)
	}
	again := exec.Command(bin, append([]string{"run"}, commandArgs(t, m[1])...)...)
	again.Env = fuzz.Env
	if out, _ := again.Output(); again.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), m[2]) {
		t.Fatalf("%s: exit %d, %q; want the same failure", m[1], again.ProcessState.ExitCode(), out)
	}
	// The README's main command: the whole suite, ending with DONE.
	if out, errOut, code := runBinary(t, bin); code != 0 || !strings.Contains(out, fmt.Sprintf("\nDONE %d scenarios, %d runs (each replayed), 0 failures in ", len(scenarios), 50*len(scenarios))) {
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
