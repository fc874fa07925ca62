package kit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pico3Expected is the pico3 port's recorded run: one line per scenario
// and the summary, as `picosim conform` prints them. Its differences have
// a verdict each in conformance/ports/pico3/README.md.
const pico3Expected = "../ports/pico3/expected.txt"

// The TypeScript pico3, through its adapter, still differs exactly as
// recorded: it runs every scenario without breaking the protocol, and a
// change on either side shows as a changed line (-update records it; then
// give the new difference its verdict in the README). Needs node and the
// npm package installed outside the repository, named by PICO3_DIR
// (shared/peer/README.md).
func TestPico3PortDiffersAsRecorded(t *testing.T) {
	dir := os.Getenv("PICO3_DIR")
	node, err := exec.LookPath("node")
	switch {
	case dir == "":
		t.Skip("PICO3_DIR is not set: install @earendil-works/pi-agent-core@0.87.1 outside the repository (shared/peer/README.md) and point PICO3_DIR at it")
	case err != nil:
		t.Skip("node is not on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules/@earendil-works/pi-agent-core")); err != nil {
		t.Skipf("PICO3_DIR=%s holds no @earendil-works/pi-agent-core: %v", dir, err)
	}
	scs, err := LoadScenarios(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sum, err := Conform(context.Background(), []string{node, "../ports/pico3/adapter.mjs"}, scs, &out, Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 0 || sum.Scenarios != len(scs) {
		t.Fatalf("the pico3 port broke the protocol: %+v\n%s", sum, out.String())
	}
	if *update {
		if err := os.WriteFile(pico3Expected, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(pico3Expected)
	if err != nil {
		t.Fatal(err)
	}
	if d := lineDiff(out.String(), string(want)); d != "" {
		t.Fatalf("the pico3 port's run changed (if intended: go test ./conformance/kit -run Pico3 -update, then give each new difference its verdict in conformance/ports/pico3/README.md):\n%s", d)
	}
}

// lineDiff names the first line where got and want differ.
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n  got:  %s\n  want: %s", i+1, gl, wl)
		}
	}
	return ""
}
