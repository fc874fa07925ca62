package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// killPointsPerBackend is how many seeded kill points each backend gets.
const killPointsPerBackend = 4

// A process killed with SIGKILL at any commit (just before it reaches
// storage, or just after, before anyone is told) leaves files that reopen
// and check clean: what a user whose machine killed the bench gets back. The points are drawn from a fixed seed; a failing one
// prints the command that repeats it.
func TestAKilledBenchLeavesASessionThatChecksClean(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it several times")
	}
	bin := picosimBinary(t)
	rng := rand.New(rand.NewPCG(14, 9))
	const turns = 12 // about 23 commits a turn
	for _, backend := range []string{"jsonl", "sqlite"} {
		for range killPointsPerBackend {
			at := fmt.Sprint(1 + rng.IntN(turns*23))
			if rng.IntN(2) == 0 {
				at += ":before"
			}
			dir := t.TempDir()
			args := []string{"bench", "--turns", fmt.Sprint(turns), "--backend", backend, "--dir", dir}
			repeat := fmt.Sprintf("%s=%s picosim %s", killAtEnv, at, strings.Join(args, " "))
			cmd := exec.Command(bin, args...)
			cmd.Env = append(cmd.Environ(), killAtEnv+"="+at)
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("%s: the bench was not killed (%v)", repeat, err)
			}
			file, checkArgs := filepath.Join(dir, "session.jsonl"), []string{}
			if backend == "sqlite" {
				file, checkArgs = filepath.Join(dir, "sessions.db"), []string{"--session", "bench"}
			}
			out, errOut, code := runBinary(t, bin, append([]string{"check", file}, checkArgs...)...)
			if code != 0 || strings.Contains(out, "✗") {
				t.Fatalf("%s, then picosim check %s: exit %d\n%s%s", repeat, file, code, out, errOut)
			}
		}
	}
}
