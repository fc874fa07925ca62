package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// picosim conform --port on the Go adapter: every scenario ✓, exit 0.
func TestConformGoAdapterAllPass(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gopico")
	if out, err := exec.Command("go", "build", "-o", bin, "../../conformance/ports/gopico").CombinedOutput(); err != nil {
		t.Fatalf("go build the Go adapter: %v\n%s", err, out)
	}
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
