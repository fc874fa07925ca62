package core_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// DESIGN §5: core code starts actors, reads the clock, sleeps and times
// only through the Runtime interface, so that the simulator can fix every
// interleaving. This test holds every non-test file under core/ to it. The
// exemptions are the code that cannot run under the simulator by nature,
// each for its reason.
var contractExempt = map[string]string{
	"realtime.go": "it is the real runtime: the implementation of the interface itself",
	"localenv":    "it runs real operating-system processes (os/exec starts goroutines of its own); the simulator uses sim/proc instead",
}

var contractBreaks = regexp.MustCompile(`\bgo func\b|\bgo [a-zA-Z_.]+\(|time\.Now\(|time\.Sleep\(|time\.After\(|time\.NewTimer\(|time\.NewTicker\(|time\.Tick\(`)

func TestCoreKeepsTheConcurrencyContract(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if why, ok := contractExempt[d.Name()]; ok {
			t.Logf("%s is exempt: %s", path, why)
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if code, _, _ := strings.Cut(line, "//"); contractBreaks.MatchString(code) {
				t.Errorf("%s:%d: %s — go through the Runtime interface (DESIGN §5)", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
