package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pico-go/pico/sim/fault"
)

// picosim's own failure modes, through the built binary: what a user gets
// when the disk is full, TMPDIR is gone, a trace is damaged, a signal
// comes, or an argument is out of range.

// oneErrorLine checks a command refused with one line on stderr, nothing
// on stdout, no Go stack, the exit status code and a message with want.
func oneErrorLine(t *testing.T, args []string, stdout, stderr string, got, code int, want string) {
	t.Helper()
	if got != code || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "picosim: ") ||
		!strings.Contains(stderr, want) || strings.Contains(stderr, "goroutine") {
		t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and one line on stderr with %q", args, got, stdout, stderr, code, want)
	}
}

// needDevFull skips a test on a system without /dev/full, where every write
// fails with ENOSPC (Linux).
func needDevFull(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
}

// A trace that cannot be written is an error, not a ✓ over an empty file.
func TestATraceThatCannotBeWrittenFailsTheRun(t *testing.T) {
	needDevFull(t)
	bin := picosimBinary(t)
	args := []string{"run", "basic-turn", "--trace", "/dev/full"}
	out, errOut, code := runBinary(t, bin, args...)
	oneErrorLine(t, args, out, errOut, code, exitEnvironment, "--trace: writing /dev/full: write /dev/full: no space left on device")
}

// A CPU or allocation profile that cannot be written is an error too:
// pprof drops its own write errors, so bench writes the profile itself.
func TestAProfileThatCannotBeWrittenFailsTheBench(t *testing.T) {
	needDevFull(t)
	bin := picosimBinary(t)
	for _, flag := range []string{"--cpuprofile", "--memprofile"} {
		args := []string{"bench", "--turns", "5", flag, "/dev/full"}
		_, errOut, code := runBinary(t, bin, args...)
		if want := "picosim: bench: " + flag + ": write /dev/full: no space left on device\n"; code != exitEnvironment || errOut != want {
			t.Fatalf("%v: exit %d, stderr %q; want %d and %q", args, code, errOut, exitEnvironment, want)
		}
	}
}

// fuzz writes failing traces into --out: one that cannot be written stops
// fuzz with an error line. The trace names are learnt from a first fuzz
// into a plain directory; the second one finds them linked to /dev/full.
func TestFuzzStopsWhenAFailureTraceCannotBeWritten(t *testing.T) {
	needDevFull(t)
	bin := picosimBinary(t)
	planted := []string{plantedEnv + "=tool-order"}
	args := []string{"fuzz", "parallel-tools", "--seeds", "12", "--workers", "1", "--fail-fast", "--out"}
	first := filepath.Join(t.TempDir(), "first")
	if out, errOut, code := runBinaryEnv(t, bin, planted, append(args, first)...); code != exitFailed {
		t.Fatalf("fuzz with a planted bug: exit %d\n%s%s", code, out, errOut)
	}
	names, _ := os.ReadDir(first)
	full := filepath.Join(t.TempDir(), "full")
	if err := os.Mkdir(full, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.Symlink("/dev/full", filepath.Join(full, n.Name())); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runBinaryEnv(t, bin, planted, append(args, full)...)
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if len(names) == 0 || code != exitEnvironment || out != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], "picosim: fuzz: started: ") ||
		!strings.HasPrefix(lines[1], "picosim: fuzz: --out: writing ") || !strings.HasSuffix(lines[1], "no space left on device") {
		t.Fatalf("fuzz into %v linked to /dev/full: exit %d, stdout %q, stderr %q; want exit 3 and the one error line after the start line", names, code, out, errOut)
	}
}

// PCT parameters beyond their bounds are refused as mistakes, on the
// command line and in a trace's header, instead of exhausting memory.
func TestPCTBeyondItsBoundsIsAMistake(t *testing.T) {
	bin := picosimBinary(t)
	for _, strategy := range []string{"pct:9223372036854775807:1", "pct:3:9223372036854775807", "pct:101:10"} {
		args := []string{"run", "basic-turn", "--strategy", strategy}
		out, errOut, code := runBinary(t, bin, args...)
		oneErrorLine(t, args, out, errOut, code, exitUsage, "--strategy: sim: strategy "+fmt.Sprintf("%q", strategy))
	}
	trace := goodTrace(t, bin)
	path := editedHeader(t, trace, `"strategy":"random"`, `"strategy":"pct:9223372036854775807:1"`)
	out, errOut, code := runBinary(t, bin, "replay", path)
	oneErrorLine(t, []string{"replay", path}, out, errOut, code, exitUsage, "invalid trace header: strategy: sim: strategy")
}

// The strategies fuzz draws and shrinks to are inside PCT's bounds.
func TestFuzzStrategiesParse(t *testing.T) {
	for d := 1; d <= fuzzDepthMax; d++ {
		spec := runSpec{sc: scenarios[0], seed: 1, backend: "memory", strategy: pctStrategy(d)}
		if _, err := spec.check(); err != nil {
			t.Errorf("%s: %v", spec.strategy, err)
		}
	}
}

// goodTrace is the trace of input-while-busy's seed 4 on memory: six host
// actions.
func goodTrace(t *testing.T, bin string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "good.jsonl")
	if out, errOut, code := runBinary(t, bin, "run", "input-while-busy", "--seed", "4", "--trace", path); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// writeTraceFile writes data to a new file and returns its path.
func writeTraceFile(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// editedHeader writes trace with old replaced by new in its header.
func editedHeader(t *testing.T, trace []byte, old, new string) string {
	t.Helper()
	lines := bytes.Split(trace, []byte("\n"))
	for i, l := range lines {
		if bytes.Contains(l, []byte(`"k":"header"`)) {
			if !bytes.Contains(l, []byte(old)) {
				t.Fatalf("the header %s lacks %s", l, old)
			}
			lines[i] = bytes.Replace(l, []byte(old), []byte(new), 1)
		}
	}
	return writeTraceFile(t, bytes.Join(lines, []byte("\n")))
}

// A trace that is not whole is damage (exit 2), not a difference (exit 1);
// a header is held to what run holds its flags to.
func TestReplayRefusesDamagedTraces(t *testing.T) {
	bin := picosimBinary(t)
	trace := goodTrace(t, bin)
	lines := bytes.SplitAfter(trace, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty string after the last newline
	long := append([]byte(`{"k":"note","detail":"`), bytes.Repeat([]byte("x"), 70<<20)...)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"cut mid-line", trace[:len(trace)-len(lines[len(lines)-1])/2], fmt.Sprintf("damaged trace: line %d is cut short", len(lines))},
		{"cut at a line boundary", bytes.Join(lines[:len(lines)-3], nil), fmt.Sprintf("damaged trace: it ends after line %d, but the run it records goes on to line %d", len(lines)-3, len(lines))},
		{"a 70 MB line", bytes.Join(append(lines[:4:4], append(long, "\"}\n"...), lines[5]), nil), "damaged trace: line 5 is longer than the 64 MiB"},
		{"empty", nil, "damaged trace: no header record"},
	} {
		path := writeTraceFile(t, c.data)
		out, errOut, code := runBinary(t, bin, "replay", path)
		oneErrorLine(t, []string{"replay", c.name}, out, errOut, code, exitUsage, c.want)
	}
	for _, c := range []struct{ old, new, want string }{
		{`"faults":{"faults":[]}`, `"faults":{"faults":[]},"drop":[-1]`, "invalid trace header: drop: -1 is not a host action index"},
		{`"faults":{"faults":[]}`, `"faults":{"faults":[]},"drop":[2,2]`, "invalid trace header: drop: action 2 is named twice"},
		{`"faults":{"faults":[]}`, `"faults":{"faults":[]},"drop":[9]`, "invalid trace header: drop: action 9: input-while-busy reaches 6 host actions (indexes 0 to 5) in this run"},
		{`"backend":"memory"`, `"backend":"oracle"`, `invalid trace header: backend: "oracle"`},
		{`"faults":{"faults":[]}`, `"faults":{"faults":[{"name":"c","kind":"crash","commit":2,"tear":5}]}`, "invalid trace header: faults: faults[0] (c) tears a line"},
	} {
		path := editedHeader(t, trace, c.old, c.new)
		out, errOut, code := runBinary(t, bin, "replay", path)
		oneErrorLine(t, []string{"replay", c.new}, out, errOut, code, exitUsage, c.want)
	}
}

// An unusable TMPDIR is one environment error (exit 3), whatever the
// command, not a failure per seed blaming the harness; the memory backend
// needs no directory at all.
func TestAnUnusableTMPDIRIsAnEnvironmentError(t *testing.T) {
	bin := picosimBinary(t)
	session := filepath.Join(t.TempDir(), "kept")
	if out, errOut, code := runBinary(t, bin, "run", "basic-turn", "--backend", "jsonl", "--keep", session); code != 0 {
		t.Fatalf("run --keep: exit %d\n%s%s", code, out, errOut)
	}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tmpdirs := []string{filepath.Join(t.TempDir(), "missing"), notDir}
	if os.Geteuid() != 0 { // root writes into a read-only directory
		readOnly := filepath.Join(t.TempDir(), "read-only")
		if err := os.Mkdir(readOnly, 0o500); err != nil {
			t.Fatal(err)
		}
		tmpdirs = append(tmpdirs, readOnly)
	}
	for _, tmpdir := range tmpdirs {
		env := []string{"TMPDIR=" + tmpdir}
		for _, args := range [][]string{
			{}, {"run", "basic-turn", "--backend", "jsonl"}, {"run", "crash-reopen", "--backend", "sqlite"},
			{"fuzz", "basic-turn", "--seeds", "2", "--backend", "jsonl"}, {"check", filepath.Join(session, "session.jsonl")},
			{"bench", "--turns", "2", "--backend", "jsonl"},
		} {
			out, errOut, code := runBinaryEnv(t, bin, env, args...)
			oneErrorLine(t, append(env, args...), out, errOut, code, exitEnvironment, "cannot make a temporary directory in "+tmpdir+" (TMPDIR)")
		}
		if out, errOut, code := runBinaryEnv(t, bin, env, "run", "basic-turn"); code != 0 {
			t.Errorf("TMPDIR=%s run basic-turn (memory): exit %d\n%s%s", tmpdir, code, out, errOut)
		}
	}
}

// A full TMPDIR fails the session's first write: one environment error,
// not a run that blames the harness for what the disk did. It needs a
// small file system of its own, which only a privileged test can mount.
func TestAFullTMPDIRIsAnEnvironmentError(t *testing.T) {
	full := filepath.Join(t.TempDir(), "full")
	if err := os.Mkdir(full, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", full, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (%v)", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(full, 0) })
	fill, err := os.Create(filepath.Join(full, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = fill.Write(make([]byte, 4096))
	}
	fill.Close()
	bin := picosimBinary(t)
	env := []string{"TMPDIR=" + full}
	for _, args := range [][]string{{"run", "input-while-busy", "--backend", "jsonl"}, {"run", "input-while-busy", "--backend", "sqlite"}, {}} {
		out, errOut, code := runBinaryEnv(t, bin, env, args...)
		oneErrorLine(t, append(env, args...), out, errOut, code, exitEnvironment, "the session's storage failed: ")
	}
}

// Without cgo the SQLite driver is a stub: every sqlite command is one
// environment error saying so, and the other backends work.
func TestSQLiteWithoutCgoIsAnEnvironmentError(t *testing.T) {
	bin := picosimBinary(t)
	db := filepath.Join(t.TempDir(), "kept")
	if out, errOut, code := runBinary(t, bin, "run", "basic-turn", "--backend", "sqlite", "--keep", db); code != 0 {
		t.Fatalf("run --keep: exit %d\n%s%s", code, out, errOut)
	}
	nocgo := picosimBinaryWithoutCgo(t)
	for _, args := range [][]string{
		{"run", "basic-turn", "--backend", "sqlite"}, {"fuzz", "--backend", "sqlite", "--seeds", "1"},
		{"bench", "--backend", "sqlite", "--turns", "1"}, {"check", filepath.Join(db, "sessions.db")},
	} {
		out, errOut, code := runBinary(t, nocgo, args...)
		oneErrorLine(t, args, out, errOut, code, exitEnvironment, "the sqlite backend needs cgo")
	}
	if out, errOut, code := runBinary(t, nocgo, "run", "basic-turn", "--backend", "jsonl"); code != 0 {
		t.Errorf("run on jsonl without cgo: exit %d\n%s%s", code, out, errOut)
	}
}

// What picosim writes is private: traces, fuzz artifacts and --keep
// directories, whatever the umask allows.
func TestWhatPicosimWritesIsPrivate(t *testing.T) {
	bin := picosimBinary(t)
	dir := t.TempDir()
	// Under umask 0 a mode is exactly what the file was created with.
	withUmask0 := func(env []string, args ...string) {
		t.Helper()
		cmd := exec.Command("/bin/sh", append([]string{"-c", `umask 000; exec "$0" "$@"`, bin}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil && !strings.Contains(strings.Join(args, " "), "fuzz") {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	trace, keep, out, profile, memProfile := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "new", "keep"), filepath.Join(dir, "failures"), filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
	withUmask0(nil, "run", "basic-turn", "--backend", "jsonl", "--trace", trace, "--keep", keep)
	withUmask0([]string{plantedEnv + "=tool-order"}, "fuzz", "parallel-tools", "--seeds", "12", "--fail-fast", "--workers", "1", "--out", out)
	withUmask0(nil, "bench", "--turns", "1", "--cpuprofile", profile, "--memprofile", memProfile)
	artifacts, _ := filepath.Glob(filepath.Join(out, "*.jsonl"))
	pages, _ := filepath.Glob(filepath.Join(out, "*.html"))
	if len(artifacts) == 0 || len(pages) == 0 {
		t.Fatal("fuzz wrote no failure trace or no page")
	}
	artifacts = append(artifacts, pages...)
	want := map[string]os.FileMode{trace: 0o600, keep: 0o700 | os.ModeDir, filepath.Dir(keep): 0o700 | os.ModeDir,
		filepath.Join(keep, "session.jsonl"): 0o600, out: 0o700 | os.ModeDir, profile: 0o600, memProfile: 0o600}
	for _, a := range artifacts {
		want[a] = 0o600
	}
	for path, mode := range want {
		if st, err := os.Stat(path); err != nil || st.Mode() != mode {
			t.Errorf("%s: %v, %v; want %v", path, st.Mode(), err, mode)
		}
	}
}

// procBound bounds how long a test waits on a picosim it started before it
// fails: a hung process is a failure, never a thing to wait out.
const procBound = 2 * time.Minute

// picosimProc is a picosim a test runs in the background to signal it.
type picosimProc struct {
	cmd              *exec.Cmd
	stdout, stderr   chan string // lines as they come; closed at EOF
	outSeen, errSeen []string
}

func startBinary(t *testing.T, bin string, env []string, args ...string) *picosimProc {
	t.Helper()
	p := &picosimProc{cmd: exec.Command(bin, args...), stdout: make(chan string, 1024), stderr: make(chan string, 1024)}
	p.cmd.Env = append(os.Environ(), env...)
	outPipe, _ := p.cmd.StdoutPipe()
	errPipe, _ := p.cmd.StderrPipe()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	for pipe, ch := range map[io.Reader]chan string{outPipe: p.stdout, errPipe: p.stderr} {
		go func() {
			defer close(ch)
			for sc := bufio.NewScanner(pipe); sc.Scan(); {
				ch <- sc.Text()
			}
		}()
	}
	return p
}

// awaitLine reads the process's stderr (or stdout) until a line starts
// with prefix: the process said it got there.
func (p *picosimProc) awaitLine(t *testing.T, onStdout bool, prefix string) {
	t.Helper()
	ch, seen := p.stderr, &p.errSeen
	if onStdout {
		ch, seen = p.stdout, &p.outSeen
	}
	deadline := time.After(procBound)
	for {
		select {
		case line, ok := <-ch:
			if !ok {
				t.Fatalf("%v ended without a line starting %q: %q", p.cmd.Args, prefix, *seen)
			}
			*seen = append(*seen, line)
			if strings.HasPrefix(line, prefix) {
				return
			}
		case <-deadline:
			t.Fatalf("%v printed no line starting %q in %v", p.cmd.Args, prefix, procBound)
		}
	}
}

// finish reads the rest of the output and returns it all with the exit
// status, or -1 and the signal when a signal killed the process.
func (p *picosimProc) finish(t *testing.T) (stdout, stderr []string, code int) {
	t.Helper()
	deadline := time.After(procBound)
	for p.stdout != nil || p.stderr != nil {
		select {
		case line, ok := <-p.stdout:
			if !ok {
				p.stdout = nil
				continue
			}
			p.outSeen = append(p.outSeen, line)
		case line, ok := <-p.stderr:
			if !ok {
				p.stderr = nil
				continue
			}
			p.errSeen = append(p.errSeen, line)
		case <-deadline:
			t.Fatalf("%v did not end within %v of its signal", p.cmd.Args, procBound)
		}
	}
	_ = p.cmd.Wait()
	return p.outSeen, p.errSeen, p.cmd.ProcessState.ExitCode()
}

// emptyDirNow fails unless dir holds nothing.
func emptyDirNow(t *testing.T, dir, what string) {
	t.Helper()
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("%s left %v in TMPDIR", what, names)
	}
}

// A SIGTERM while a command's temporary directory exists ends it with
// 128+15 and the directory removed. The command waits at the pauseEnv
// point (its first temporary directory, or a bench's 50th commit) until the
// signal, so none of this races.
func TestSIGTERMRemovesTemporaryDirectories(t *testing.T) {
	bin := picosimBinary(t)
	session := filepath.Join(t.TempDir(), "kept")
	if out, errOut, code := runBinary(t, bin, "run", "basic-turn", "--backend", "jsonl", "--keep", session); code != 0 {
		t.Fatalf("run --keep: exit %d\n%s%s", code, out, errOut)
	}
	for _, c := range []struct {
		pause string
		args  []string
	}{
		{"tempdir", []string{"run", "crash-reopen", "--backend", "jsonl"}}, {"tempdir", []string{"run", "basic-turn", "--backend", "sqlite"}},
		{"tempdir", []string{"check", filepath.Join(session, "session.jsonl")}}, {"tempdir", []string{"fuzz", "--time", "1h", "--backend", "jsonl"}},
		{"tempdir", nil}, {"tempdir", []string{"bench", "--turns", "100000", "--backend", "jsonl"}},
		// Halfway through a turn of a long bench, its session on disk.
		{"commit:50", []string{"bench", "--turns", "100000", "--backend", "jsonl"}}, {"commit:50", []string{"bench", "--turns", "100000", "--backend", "sqlite"}},
	} {
		args := c.args
		tmp := t.TempDir()
		p := startBinary(t, bin, []string{"TMPDIR=" + tmp, pauseEnv + "=" + c.pause}, args...)
		p.awaitLine(t, false, "picosim: paused in "+tmp)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := p.finish(t)
		if code != exitSignalBase+int(syscall.SIGTERM) {
			t.Errorf("%v, SIGTERM: exit %d, stderr %q; want %d", args, code, stderr, exitSignalBase+int(syscall.SIGTERM))
		}
		emptyDirNow(t, tmp, fmt.Sprint(args))
	}
}

// SIGINT ends fuzz with its partial summary, the DONE line saying it was
// interrupted, and the status 128+2; every run's directory is gone. The
// signal comes once fuzz said it started its workers, whatever they run.
func TestSIGINTEndsFuzzWithItsSummary(t *testing.T) {
	if signal.Ignored(os.Interrupt) {
		t.Skip("SIGINT is ignored here, and so in the picosim this test starts")
	}
	bin := picosimBinary(t)
	tmp := t.TempDir()
	p := startBinary(t, bin, []string{"TMPDIR=" + tmp}, "fuzz", "--time", "1h", "--backend", "jsonl", "--out", filepath.Join(t.TempDir(), "out"))
	p.awaitLine(t, false, fmt.Sprintf("picosim: fuzz: started: %d scenarios on jsonl from seed 1, for 1h0m0s, ", len(scenarios)))
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := p.finish(t)
	done := regexp.MustCompile(`^DONE \d+ runs over ` + strconv.Itoa(len(scenarios)) + ` scenarios, \d+ faults injected \(\d+ restarts\), 0 failures in [\d.]+s: \d+ schedules/s, interrupted by SIGINT$`)
	if code != exitSignalBase+int(syscall.SIGINT) || len(stdout) != 1 || !done.MatchString(stdout[0]) {
		t.Errorf("fuzz, SIGINT: exit %d, stdout %q, stderr %q; want %d and the interrupted DONE line", code, stdout, stderr, exitSignalBase+int(syscall.SIGINT))
	}
	emptyDirNow(t, tmp, "fuzz")
}

// SIGTERM after the suite's first scenario: the scenarios that finished,
// and a DONE line saying the suite was interrupted.
func TestSIGTERMEndsTheSuiteWithWhatFinished(t *testing.T) {
	bin := picosimBinary(t)
	tmp := t.TempDir()
	p := startBinary(t, bin, []string{"TMPDIR=" + tmp})
	p.awaitLine(t, true, "✓ basic-turn ")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := p.finish(t)
	last := stdout[len(stdout)-1]
	if code != exitSignalBase+int(syscall.SIGTERM) || !regexp.MustCompile(`^DONE [1-7] scenarios, \d+ runs \(each replayed\), 0 failures in [\d.]+s, interrupted by SIGTERM$`).MatchString(last) {
		t.Errorf("suite, SIGTERM: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	emptyDirNow(t, tmp, "the suite")
}

// The reproduce line a failure prints runs as printed in a POSIX shell,
// its fault plan's JSON quoted (README: paste it after `go run ./cmd/`).
func TestAPrintedReproduceLineRunsAsPrinted(t *testing.T) {
	bin := picosimBinary(t)
	planted := []string{plantedEnv + "=ack-failed"}
	plan := `{"faults":[{"name":"f-1","kind":"fail","commit":3}]}`
	out, _, code := runBinaryEnv(t, bin, planted, "run", "basic-turn", "--backend", "jsonl", "--faults", plan)
	m := regexp.MustCompile(`(?m)^✗ (.*)\n  reproduce: (picosim run .*)$`).FindStringSubmatch(out)
	if code != exitFailed || m == nil || !strings.Contains(m[2], ` --faults '`+plan+`'`) {
		t.Fatalf("a failing run: exit %d, %q; want a reproduce line with the plan quoted", code, out)
	}
	path := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(path, "picosim")); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("/bin/sh", "-c", m[2])
	sh.Env = append(os.Environ(), append(planted, "PATH="+path+string(os.PathListSeparator)+os.Getenv("PATH"))...)
	again, _ := sh.Output()
	if sh.ProcessState.ExitCode() != exitFailed || !strings.HasPrefix(string(again), "✗ "+m[1]+"\n") {
		t.Fatalf("sh -c %q: exit %d, %q; want the same failure", m[2], sh.ProcessState.ExitCode(), again)
	}
	for _, arg := range []string{"plain-1.2", `{"a":"b c"}`, "it's", `$HOME "x" \n`, ""} {
		echo := exec.Command("/bin/sh", "-c", "printf %s "+shellQuote(arg))
		if got, err := echo.Output(); err != nil || string(got) != arg {
			t.Errorf("shellQuote(%q) = %s; the shell reads %q (%v)", arg, shellQuote(arg), got, err)
		}
	}
}

// The README's advice for a printed reproduce line, followed word for
// word: paste the line after the words it names, in the repository.
func TestTheREADMEsReproduceAdviceWorks(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	advice := regexp.MustCompile("Paste it after `([^`]+)`").FindSubmatch(readme)
	if advice == nil {
		t.Fatal("the README gives no paste-after advice for a reproduce line")
	}
	bin := picosimBinary(t)
	planted := []string{plantedEnv + "=ack-failed"}
	out, _, _ := runBinaryEnv(t, bin, planted, "run", "basic-turn", "--faults", `{"faults":[{"name":"f-1","kind":"fail","commit":3}]}`)
	m := regexp.MustCompile(`(?m)^✗ (.*)\n  reproduce: (.*)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no reproduce line in %q", out)
	}
	sh := exec.Command("/bin/sh", "-c", string(advice[1])+m[2])
	sh.Dir, sh.Env = filepath.Join("..", ".."), append(os.Environ(), planted...)
	again, _ := sh.CombinedOutput()
	if !strings.HasPrefix(string(again), "✗ "+m[1]+"\n") {
		t.Fatalf("sh -c %q: %q; want the same failure", string(advice[1])+m[2], again)
	}
}

// --keep says which file to pass to picosim check, and that command passes.
func TestKeepNamesTheFileToCheck(t *testing.T) {
	bin := picosimBinary(t)
	for _, backend := range []string{"jsonl", "sqlite"} {
		dir := filepath.Join(t.TempDir(), "kept dir")
		out, errOut, code := runBinary(t, bin, "run", "fork-and-continue", "--backend", backend, "--keep", dir)
		m := regexp.MustCompile(`(?m)^  kept: (picosim check .*)$`).FindStringSubmatch(out)
		if code != 0 || m == nil || !strings.Contains(m[1], filepath.Join(dir, sessionFile(backend, ""))) {
			t.Fatalf("run --keep on %s: exit %d\n%s%s", backend, code, out, errOut)
		}
		sh := exec.Command("/bin/sh", "-c", `exec "$0" "$@"`+strings.TrimPrefix(m[1], "picosim"), bin)
		if got, err := sh.Output(); err != nil || !strings.HasPrefix(string(got), "✓ ") {
			t.Errorf("%s: %v\n%s", m[1], err, got)
		}
	}
	args := []string{"run", "basic-turn", "--keep", t.TempDir()}
	out, errOut, code := runBinary(t, bin, args...)
	oneErrorLine(t, args, out, errOut, code, exitUsage, "--keep: the memory backend keeps no files")
}

// Mistakes of use are one line on stderr and exit 2, the missing argument
// included; flags may come before or after the positional arguments.
func TestArgumentMistakesAndOrder(t *testing.T) {
	bin := picosimBinary(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "picosim: run: missing SCENARIO; usage: picosim run SCENARIO"},
		{[]string{"run", "--seed", "3"}, "picosim: run: missing SCENARIO"},
		{[]string{"replay"}, "picosim: replay: missing TRACE; usage: picosim replay TRACE"},
		{[]string{"check"}, "picosim: check: missing SESSION; usage: picosim check SESSION"},
		{[]string{"fuzz", "--time", "0"}, "picosim: fuzz: --time 0s: want a positive duration"},
		{[]string{"fuzz", "--time", "-5s"}, "picosim: fuzz: --time -5s: want a positive duration"},
		{[]string{"fuzz", "--seeds", "3", "--time", "1s"}, "picosim: fuzz: --seeds and --time exclude each other"},
		{[]string{"run", "basic-turn", "--drop", "9"}, "picosim: run: --drop: action 9: basic-turn reaches 1 host action (index 0) in this run"},
		{[]string{"run", "basic-turn", "--seed", "x"}, `picosim: run: invalid value "x" for flag -seed`},
		{[]string{"replay", "a", "b"}, `picosim: replay: unexpected argument "b"`},
		{[]string{"bench", "--turns", "9223372036854775807"}, "picosim: bench: --turns 9223372036854775807: want 1 to 1000000"},
	} {
		out, errOut, code := runBinary(t, bin, c.args...)
		oneErrorLine(t, c.args, out, errOut, code, exitUsage, c.want)
	}
	trace := filepath.Join(t.TempDir(), "t.jsonl")
	for _, args := range [][]string{
		{"run", "--seed", "3", "--trace", trace, "basic-turn"},
		{"replay", trace},
		{"fuzz", "--seeds", "1", "basic-turn", "--out", t.TempDir()},
	} {
		if out, errOut, code := runBinary(t, bin, args...); code != 0 {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	session := filepath.Join(t.TempDir(), "kept")
	if out, errOut, code := runBinary(t, bin, "run", "--backend", "sqlite", "--keep", session, "basic-turn"); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := runBinary(t, bin, "check", "--session", "picosim", filepath.Join(session, "sessions.db")); code != 0 {
		t.Errorf("check with the flag first: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, _ := runBinary(t, bin, "run", "--help"); !strings.Contains(out, "(default memory;") {
		t.Errorf("run --help does not state the default backend:\n%s", out)
	}
}

// The machine's errors are told from the run's: the errno a full or
// read-only disk gives, wrapped however deep, but never a planned fault;
// each error type has its exit status.
func TestEnvironmentErrorsAreToldFromTheRuns(t *testing.T) {
	full := fmt.Errorf("jsonl: %w", &os.PathError{Op: "write", Path: "session.jsonl", Err: syscall.ENOSPC})
	injected := &fault.Error{Fault: fault.Fault{Name: "f", Kind: fault.Fail, Commit: 1}, Commit: 1, Err: fault.ErrInjected}
	for err, want := range map[error]bool{
		full: true, fmt.Errorf("open: %w", syscall.EROFS): true, injected: false,
		errors.New("no space left on device"): false, nil: false, fmt.Errorf("x: %w", syscall.ENOENT): false,
	} {
		if got := isEnvironment(err); got != want {
			t.Errorf("isEnvironment(%v) = %v; want %v", err, got, want)
		}
	}
	for err, want := range map[error]int{
		nil: 0, errors.New("a run failed"): exitFailed, usagef("bad"): exitUsage,
		&fieldError{"--drop", errors.New("x")}: exitUsage, &fieldError{"--trace", &envError{full}}: exitEnvironment,
		fmt.Errorf("run: %w", &interrupted{sig: syscall.SIGTERM}): exitSignalBase + 15,
	} {
		if got := exitCode(err); got != want {
			t.Errorf("exitCode(%v) = %d; want %d", err, got, want)
		}
	}
}
