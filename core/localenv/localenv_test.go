//go:build unix

package localenv_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/localenv"
)

// newEnv returns an environment rooted in a fresh directory, with spill
// files in another, and the root as New resolved it.
func newEnv(t *testing.T, opts ...localenv.Option) (*localenv.Env, string) {
	t.Helper()
	opts = append([]localenv.Option{localenv.WithSpillDir(t.TempDir())}, opts...)
	env, err := localenv.New(t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return env, env.Root()
}

// goroutineID is the id of the calling goroutine, from its stack header
// ("goroutine 18 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return strings.Fields(string(buf))[1]
}

// output collects what one Exec delivered, per stream and in delivery order,
// and fails the test if OnUpdate runs on any goroutine but the caller's.
// It appends to plain slices, so concurrent calls are also a race.
type output struct {
	t       *testing.T
	caller  string
	chunks  []agent.OutputChunk
	streams map[string]*strings.Builder
}

func newOutput(t *testing.T) *output {
	return &output{t: t, caller: goroutineID(), streams: map[string]*strings.Builder{"stdout": {}, "stderr": {}}}
}

func (o *output) onUpdate(c agent.OutputChunk) {
	if g := goroutineID(); g != o.caller {
		o.t.Errorf("OnUpdate ran on goroutine %s; want the caller's, %s", g, o.caller)
	}
	o.chunks = append(o.chunks, c)
	b, ok := o.streams[c.Stream]
	if !ok {
		o.t.Errorf("chunk on stream %q; want stdout or stderr", c.Stream)
		return
	}
	b.WriteString(c.Data)
}

func (o *output) all() string {
	var b strings.Builder
	for _, c := range o.chunks {
		b.WriteString(c.Data)
	}
	return b.String()
}

func TestOutputArrivesInOrderPerStreamOnTheCallingGoroutine(t *testing.T) {
	env, _ := newEnv(t)
	out := newOutput(t)
	res, err := env.Exec(t.Context(), `printf 'a\n'; printf 'b\n' >&2; printf 'c\n'`, agent.ExecOptions{OnUpdate: out.onUpdate})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if got, want := res, (agent.ExecResult{}); got != want {
		t.Errorf("result %+v; want %+v", got, want)
	}
	if got := out.streams["stdout"].String(); got != "a\nc\n" {
		t.Errorf("stdout %q; want %q", got, "a\nc\n")
	}
	if got := out.streams["stderr"].String(); got != "b\n" {
		t.Errorf("stderr %q; want %q", got, "b\n")
	}
}

func TestExecRunsInCwdWithEnvOverrides(t *testing.T) {
	env, root := newEnv(t)
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LOCALENV_KEPT", "kept")
	out := newOutput(t)
	_, err := env.Exec(t.Context(), `printf '%s %s %s' "$PWD" "$LOCALENV_KEPT" "$HOME"`, agent.ExecOptions{
		Cwd: "sub", Env: map[string]string{"HOME": "/nowhere"}, OnUpdate: out.onUpdate})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if got, want := out.all(), filepath.Join(root, "sub")+" kept /nowhere"; got != want {
		t.Errorf("output %q; want %q", got, want)
	}
}

func TestExitStatusAndForeignSignalAreReported(t *testing.T) {
	env, _ := newEnv(t)
	for _, tc := range []struct {
		command string
		want    agent.ExecResult
	}{
		{"exit 3", agent.ExecResult{ExitCode: 3}},
		{"kill -TERM $$", agent.ExecResult{ExitCode: 143, Signal: "TERM"}},
		{"kill -USR1 $$", agent.ExecResult{ExitCode: 128 + int(syscall.SIGUSR1), Signal: "USR1"}},
	} {
		res, err := env.Exec(t.Context(), tc.command, agent.ExecOptions{})
		if err != nil {
			t.Fatalf("Exec(%q): %v", tc.command, err)
		}
		if res != tc.want {
			t.Errorf("Exec(%q) = %+v; want %+v", tc.command, res, tc.want)
		}
	}
}

func TestAProcessThatCannotStartIsAnError(t *testing.T) {
	env, _ := newEnv(t)
	if _, err := env.Exec(t.Context(), "true", agent.ExecOptions{Cwd: "missing"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Exec in a missing cwd: %v; want an error wrapping fs.ErrNotExist", err)
	}
	if _, err := env.Exec(t.Context(), "true", agent.ExecOptions{Env: map[string]string{"A=B": "c"}}); err == nil {
		t.Errorf("Exec with env name %q: no error; want one", "A=B")
	}
	// A ctx already done starts nothing: the command would create a file.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := env.Exec(ctx, "touch started", agent.ExecOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Exec with a done ctx: %v; want an error wrapping context.Canceled", err)
	}
	if _, err := env.Stat(t.Context(), "started"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat(started) after Exec with a done ctx: %v; want fs.ErrNotExist", err)
	}
}

// gone reports whether pid has ended: it no longer exists, or it is a
// zombie nobody has reaped yet (init in a container may never reap it).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	// "pid (comm) S ...": the state follows the last ')'.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// waitGone polls until pid has ended, for up to 5 s: the kill has been
// delivered when Exec returns, but the process may take a moment to die.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if gone(pid) {
			return
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	t.Errorf("process %d is still running after its group was killed", pid)
}

func TestCancelKillsTheProcessGroupWithGrandchildren(t *testing.T) {
	env, root := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pid := 0
	res, err := env.Exec(ctx, `sh -c 'sleep 300 & echo $! > pidfile; echo ready; wait'`, agent.ExecOptions{
		OnUpdate: func(c agent.OutputChunk) {
			data, err := os.ReadFile(filepath.Join(root, "pidfile"))
			if err != nil {
				t.Errorf("pidfile: %v", err)
			}
			pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
			cancel()
		}})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if want := (agent.ExecResult{ExitCode: 143, Signal: "TERM", Killed: true}); res != want {
		t.Errorf("result %+v; want %+v", res, want)
	}
	if pid <= 0 {
		t.Fatalf("no grandchild pid was read")
	}
	waitGone(t, pid)
}

func TestAProcessIgnoringTermIsKilledAfterTheGrace(t *testing.T) {
	env, _ := newEnv(t, localenv.WithKillGrace(200*time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := newOutput(t)
	res, err := env.Exec(ctx, `trap '' TERM; echo ready; sleep 300`, agent.ExecOptions{
		OnUpdate: func(c agent.OutputChunk) {
			out.onUpdate(c)
			cancel()
		}})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if want := (agent.ExecResult{ExitCode: 137, Signal: "KILL", Killed: true}); res != want {
		t.Errorf("result %+v; want %+v", res, want)
	}
	if got := out.all(); got != "ready\n" {
		t.Errorf("output %q; want %q", got, "ready\n")
	}
}

// A process the shell leaves running keeps the output pipes open; Exec
// must still return once the shell has exited (liveness), with what was
// printed before.
func TestExecReturnsWhenALeftoverProcessHoldsTheOutput(t *testing.T) {
	env, _ := newEnv(t)
	out := newOutput(t)
	res, err := env.Exec(t.Context(), `sleep 300 & echo $!`, agent.ExecOptions{OnUpdate: out.onUpdate})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(out.all())); err != nil {
		t.Errorf("output %q; want the pid of the background sleep", out.all())
	} else {
		syscall.Kill(pid, syscall.SIGKILL) // it is left running by design
	}
	if res != (agent.ExecResult{}) {
		t.Errorf("result %+v; want exit 0", res)
	}
}

func TestOutputPastSpillAfterIsKeptWholeInAPrivateFile(t *testing.T) {
	const total = 5_000_000
	env, _ := newEnv(t)
	command := `head -c 5000000 /dev/zero | tr '\0' x`
	for _, tc := range []struct {
		spillAfter int
		wantSpill  bool
	}{{1000, true}, {0, false}, {total, false}} {
		delivered := 0
		res, err := env.Exec(t.Context(), command, agent.ExecOptions{SpillAfter: tc.spillAfter,
			OnUpdate: func(c agent.OutputChunk) { delivered += len(c.Data) }})
		if err != nil {
			t.Fatalf("SpillAfter %d: Exec: %v", tc.spillAfter, err)
		}
		if delivered != total {
			t.Errorf("SpillAfter %d: %d bytes delivered; want %d", tc.spillAfter, delivered, total)
		}
		if !tc.wantSpill {
			if res.SpillPath != "" {
				t.Errorf("SpillAfter %d: SpillPath %q; want none", tc.spillAfter, res.SpillPath)
			}
			continue
		}
		if res.SpillPath == "" {
			t.Fatalf("SpillAfter %d: no SpillPath; want one", tc.spillAfter)
		}
		fi, err := os.Stat(res.SpillPath)
		if err != nil {
			t.Fatalf("spill file: %v", err)
		}
		if fi.Size() != total || fi.Mode().Perm() != 0o600 {
			t.Errorf("spill file size %d, mode %v; want %d, -rw-------", fi.Size(), fi.Mode().Perm(), total)
		}
	}
}

// The spill file holds both streams in the order they were delivered, and
// the default spill directory is private and under os.TempDir().
func TestSpillInterleavesStreamsAsDelivered(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	env, err := localenv.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := newOutput(t)
	res, err := env.Exec(t.Context(), `for i in 1 2 3; do echo out$i; echo err$i >&2; done`,
		agent.ExecOptions{SpillAfter: 4, OnUpdate: out.onUpdate})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	data, err := os.ReadFile(res.SpillPath)
	if err != nil {
		t.Fatalf("spill file: %v", err)
	}
	if got, want := string(data), out.all(); got != want {
		t.Errorf("spill file %q; want the delivered output %q", got, want)
	}
	if got, want := out.streams["stderr"].String(), "err1\nerr2\nerr3\n"; got != want {
		t.Errorf("stderr %q; want %q", got, want)
	}
	dir := filepath.Dir(res.SpillPath)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != tmp || fi.Mode().Perm() != 0o700 {
		t.Errorf("spill directory %s, mode %v; want one under %s, drwx------", dir, fi.Mode().Perm(), tmp)
	}
	// The file tools reach the spill file a diagnostic names, though it is
	// outside the root, and nothing else there.
	if got, err := env.ReadFile(t.Context(), res.SpillPath); err != nil || string(got) != string(data) {
		t.Errorf("ReadFile(spill path) = %q, %v; want the spilled output", got, err)
	}
	if fi, err := env.Stat(t.Context(), res.SpillPath); err != nil || fi.Size != int64(len(data)) {
		t.Errorf("Stat(spill path) = %+v, %v", fi, err)
	}
	other := filepath.Join(tmp, "other")
	if err := os.WriteFile(other, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	var esc *localenv.EscapeError
	if _, err := env.ReadFile(t.Context(), other); !errors.As(err, &esc) {
		t.Errorf("ReadFile(%s) = %v; want an EscapeError: only the spill directory is reachable", other, err)
	}
	if err := env.WriteFile(t.Context(), res.SpillPath, []byte("x")); !errors.As(err, &esc) {
		t.Errorf("WriteFile(spill path) = %v; want an EscapeError: spill files are read-only to the tools", err)
	}
}

func TestPathsOutsideTheRootAreRefused(t *testing.T) {
	env, root := newEnv(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "new-dangling"), filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	refused := func(op string, err error) {
		t.Helper()
		var esc *localenv.EscapeError
		if !errors.As(err, &esc) || !errors.Is(err, fs.ErrPermission) {
			t.Errorf("%s: %v; want an *EscapeError wrapping fs.ErrPermission", op, err)
			return
		}
		if esc.Root != root || !strings.Contains(err.Error(), root) || !strings.Contains(err.Error(), esc.Path) {
			t.Errorf("%s: %q (root %q); want the path and the root %s named", op, err, esc.Root, root)
		}
	}
	_, err := env.ReadFile(ctx, "../x")
	refused("ReadFile(../x)", err)
	_, err = env.ReadFile(ctx, "sub/../../x")
	refused("ReadFile(sub/../../x)", err)
	refused("WriteFile(/etc/passwd)", env.WriteFile(ctx, "/etc/passwd", []byte("x")))
	_, err = env.ReadFile(ctx, "link/secret")
	refused("ReadFile(link/secret)", err)
	_, err = env.Stat(ctx, "link/secret")
	refused("Stat(link/secret)", err)
	refused("WriteFile(link/new)", env.WriteFile(ctx, "link/new", []byte("x")))
	refused("WriteFile(link/a/b)", env.WriteFile(ctx, "link/a/b", []byte("x")))
	refused("WriteFile(dangling)", env.WriteFile(ctx, "dangling", []byte("x")))
	_, err = env.Exec(ctx, "true", agent.ExecOptions{Cwd: ".."})
	refused("Exec(cwd ..)", err)
	_, err = env.Exec(ctx, "true", agent.ExecOptions{Cwd: "link"})
	refused("Exec(cwd link)", err)

	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "secret" {
		t.Errorf("outside the root: %v; want only secret", entries)
	}
}

func TestFilesRoundTripWithPrivateModes(t *testing.T) {
	env, root := newEnv(t)
	ctx := t.Context()
	data := []byte("hello\n")
	if err := env.WriteFile(ctx, "a/b/c.txt", data); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	got, err := env.ReadFile(ctx, filepath.Join(root, "a/b/c.txt")) // absolute, inside
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("ReadFile = %q, %v; want %q", got, err, data)
	}
	want := agent.FileInfo{Path: filepath.Join(root, "a", "b", "c.txt"), Size: int64(len(data))}
	if fi, err := env.Stat(ctx, "a/./b/../b/c.txt"); err != nil || fi != want {
		t.Errorf("Stat = %+v, %v; want %+v", fi, err, want)
	}
	for path, mode := range map[string]fs.FileMode{"a": 0o700, "a/b": 0o700, "a/b/c.txt": 0o600} {
		fi, err := os.Stat(filepath.Join(root, path))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, mode)
		}
	}
	// Replacing a file rewrites it, through a symlink that stays inside.
	if err := os.Symlink("a/b/c.txt", filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	if err := env.WriteFile(ctx, "alias", []byte("bye")); err != nil {
		t.Fatalf("WriteFile(alias): %v", err)
	}
	if got, err := env.ReadFile(ctx, "a/b/c.txt"); err != nil || string(got) != "bye" {
		t.Errorf("ReadFile after replacing = %q, %v; want %q", got, err, "bye")
	}

	if _, err := env.ReadFile(ctx, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing): %v; want fs.ErrNotExist", err)
	}
	if _, err := env.Stat(ctx, "no/such/file"); !errors.Is(err, agent.ErrNotExist) {
		t.Errorf("Stat(no/such/file): %v; want fs.ErrNotExist", err)
	}
}

func TestNewRequiresAnExistingDirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{filepath.Join(dir, "missing"), file} {
		var re *localenv.RootError
		if _, err := localenv.New(root); !errors.As(err, &re) || re.Root != root {
			t.Errorf("New(%s): %v; want a *RootError naming it", root, err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	env, err := localenv.New(link)
	if err != nil || env.Root() != dir {
		t.Errorf("New(link to %s): root %v, %v; want the resolved directory", dir, env, err)
	}
}

// A grandchild that ignores TERM, and whose output goes elsewhere, still
// gets the group's KILL once the grace ends, though the shell itself died
// of the TERM (found by review: the KILL went out only while the shell
// lived).
func TestAGrandchildIgnoringTermIsKilledAfterTheGrace(t *testing.T) {
	env, root := newEnv(t, localenv.WithKillGrace(200*time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pid := 0
	// The grandchild says it has set its trap before the shell says ready,
	// so the TERM cannot land before the trap does.
	res, err := env.Exec(ctx, `sh -c 'trap "" TERM; : > armed; while :; do sleep 0.05; done' >/dev/null 2>&1 & echo $! > pidfile; until [ -e armed ]; do sleep 0.01; done; echo ready; wait`, agent.ExecOptions{
		OnUpdate: func(c agent.OutputChunk) {
			data, err := os.ReadFile(filepath.Join(root, "pidfile"))
			if err != nil {
				t.Errorf("pidfile: %v", err)
			}
			pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
			cancel()
		}})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if !res.Killed {
		t.Errorf("result %+v; want killed", res)
	}
	if pid <= 0 {
		t.Fatalf("no grandchild pid was read")
	}
	waitGone(t, pid)
}
