package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func buildGoAdapter(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gopico")
	if out, err := exec.Command("go", "build", "-o", bin, "../../conformance/ports/gopico").CombinedOutput(); err != nil {
		t.Fatalf("go build the Go adapter: %v\n%s", err, out)
	}
	return bin
}

// picosim conform --port on the Go adapter: every scenario ✓, exit 0.
func TestConformGoAdapterAllPass(t *testing.T) {
	bin := buildGoAdapter(t)
	var out, errOut bytes.Buffer
	code := conformMain(context.Background(), []string{"--port", bin, "--scenarios", "../../fixtures/scenarios"}, &out, &errOut)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if code != 0 || len(lines) < 2 {
		t.Fatalf("exit %d, stderr %q:\n%s", code, errOut.String(), out.String())
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "✓ ") {
			t.Errorf("not ✓: %s", l)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "DONE ") || !strings.Contains(last, " 0 differ, 0 unsupported, 0 failed") {
		t.Errorf("summary %q", last)
	}
}

// Misuse is exit 2 with one line saying what is wrong.
func TestConformMisuse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--port is required"},
		{[]string{"--port", "x", "extra"}, `unexpected argument "extra"`},
		{[]string{"--port", "x", "--run", "("}, "--run"},
		{[]string{"--port", "x", "--scenarios", t.TempDir()}, "no scenarios"},
		{[]string{"--port", "/nonexistent/port", "--scenarios", "../../fixtures/scenarios", "--run", "^basic-turn$"}, "start"},
	} {
		var out, errOut bytes.Buffer
		code := conformMain(context.Background(), tc.args, &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("conform %v: exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

// A scenario whose expectation differs is ✗ with its first differing path
// and both values, and the exit status is 1.
func TestConformDifferenceExitsOne(t *testing.T) {
	data, err := os.ReadFile("../../fixtures/scenarios/basic-turn.txt")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	edited := strings.Replace(string(data), `"text":"hello"`, `"text":"HELLO"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "basic-turn.txt"), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := conformMain(context.Background(), []string{"--port", buildGoAdapter(t), "--scenarios", dir}, &out, &errOut)
	want := "✗ basic-turn: conversations[0].entries[2].model[0].text: got \"hello\"; want \"HELLO\"\nDONE 1 scenarios: 0 ✓, 1 differ, 0 unsupported, 0 failed\n"
	if code != exitFailed || out.String() != want {
		t.Fatalf("exit %d, stdout:\n%s\nwant exit 1 and:\n%s", code, out.String(), want)
	}
}
