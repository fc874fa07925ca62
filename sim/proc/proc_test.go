package proc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/clock"
	"github.com/pico-go/pico/sim/proc"
)

// out is one chunk as a caller saw it: when (virtual ms since the run
// began), on which stream, what.
type out struct {
	AtMs   int64
	Stream string
	Data   string
}

// ended is how one Exec returned, and when.
type ended struct {
	Result agent.ExecResult
	Err    error
	AtMs   int64
}

func sinceEpochMs(rt core.Runtime) int64 { return rt.Now().Sub(clock.Epoch).Milliseconds() }

// capture returns an OnUpdate that appends every chunk, stamped with the
// virtual time it arrived, to log.
func capture(rt core.Runtime, log *[]out) func(agent.OutputChunk) {
	return func(c agent.OutputChunk) {
		*log = append(*log, out{AtMs: sinceEpochMs(rt), Stream: c.Stream, Data: c.Data})
	}
}

// simulate runs body as the main actor of a seeded simulation and fails the
// test unless the run finishes cleanly. Assertions belong after it returns:
// body runs on an actor goroutine, where t.Fatal must not be called.
func simulate(t *testing.T, seed uint64, body func(ctx context.Context, s *sim.Sim)) {
	t.Helper()
	s := sim.New(sim.Options{Seed: seed})
	if err := s.Run(context.Background(), func(ctx context.Context) { body(ctx, s) }); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
}

// execOnce runs one command on a fresh Env from scripts, with a killer actor
// that cancels the process's ctx after killAfterMs (negative: never), and
// returns its output and ending.
func execOnce(t *testing.T, seed uint64, scripts proc.Scripts, command string, killAfterMs int) ([]out, ended) {
	t.Helper()
	var log []out
	var end ended
	simulate(t, seed, func(ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		env := proc.New(rt, scripts)
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if killAfterMs >= 0 {
			rt.Go(ctx, "killer", func(ctx context.Context) {
				rt.Sleep(ctx, time.Duration(killAfterMs)*time.Millisecond)
				cancel()
			})
		}
		res, err := env.Exec(pctx, command, agent.ExecOptions{OnUpdate: capture(rt, &log)})
		end = ended{Result: res, Err: err, AtMs: sinceEpochMs(rt)}
	})
	return log, end
}

func stdout(afterMs int, data string) proc.Chunk {
	return proc.Chunk{AfterMs: afterMs, Stream: proc.StreamStdout, Data: data}
}

func stderr(afterMs int, data string) proc.Chunk {
	return proc.Chunk{AfterMs: afterMs, Stream: proc.StreamStderr, Data: data}
}

func one(command string, sc proc.Script) proc.Scripts {
	return proc.Scripts{Commands: map[string]proc.Script{command: sc}}
}

func TestChunksArriveInOrderAtScriptedVirtualTimes(t *testing.T) {
	scripts := one("make", proc.Script{
		Chunks:   []proc.Chunk{stdout(0, "a"), stdout(10, "b"), stderr(0, "c"), stdout(25, "d")},
		ExitCode: 2,
	})
	log, end := execOnce(t, 1, scripts, "make", -1)
	want := []out{{0, "stdout", "a"}, {10, "stdout", "b"}, {10, "stderr", "c"}, {35, "stdout", "d"}}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if want := (ended{Result: agent.ExecResult{ExitCode: 2}, AtMs: 35}); !cmp.Equal(want, end) {
		t.Errorf("ended = %+v; want %+v", end, want)
	}
}

func TestProcessExitsWithItsScriptedStatus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script proc.Script
		atMs   int64
	}{
		{"success", proc.Script{}, 0},
		{"failure", proc.Script{ExitCode: 1}, 0},
		{"failure after output", proc.Script{Chunks: []proc.Chunk{stdout(7, "x")}, ExitCode: 42}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, end := execOnce(t, 1, one("cmd", tc.script), "cmd", -1)
			want := ended{Result: agent.ExecResult{ExitCode: tc.script.ExitCode}, AtMs: tc.atMs}
			if !cmp.Equal(want, end) {
				t.Errorf("ended = %+v; want %+v", end, want)
			}
		})
	}
}

func TestCancelKillsTheProcessAndStopsItsOutput(t *testing.T) {
	scripts := one("build", proc.Script{Chunks: []proc.Chunk{stdout(10, "1"), stdout(10, "2"), stdout(10, "3"), stdout(10, "4")}})
	log, end := execOnce(t, 1, scripts, "build", 25)
	want := []out{{10, "stdout", "1"}, {20, "stdout", "2"}}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if want := (ended{Result: agent.ExecResult{ExitCode: proc.ExitCodeKilled, Killed: true}, AtMs: 25}); !cmp.Equal(want, end) {
		t.Errorf("ended = %+v; want %+v", end, want)
	}
}

func TestChunkDueAtTheKillInstantArrivesUnderEverySeed(t *testing.T) {
	scripts := one("build", proc.Script{Chunks: []proc.Chunk{stdout(10, "1"), stdout(10, "2"), stdout(10, "3")}})
	for seed := range uint64(20) {
		log, end := execOnce(t, seed, scripts, "build", 20)
		want := []out{{10, "stdout", "1"}, {20, "stdout", "2"}}
		if diff := cmp.Diff(want, log); diff != "" {
			t.Errorf("seed %d: output (-want +got):\n%s", seed, diff)
		}
		if want := (ended{Result: agent.ExecResult{ExitCode: proc.ExitCodeKilled, Killed: true}, AtMs: 20}); !cmp.Equal(want, end) {
			t.Errorf("seed %d: ended = %+v; want %+v", seed, end, want)
		}
	}
}

func TestCtxDoneBeforeExecKillsAtStart(t *testing.T) {
	var log []out
	var end ended
	simulate(t, 1, func(ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		env := proc.New(rt, one("ls", proc.Script{Chunks: []proc.Chunk{stdout(0, "never")}}))
		pctx, cancel := context.WithCancel(ctx)
		cancel()
		res, err := env.Exec(pctx, "ls", agent.ExecOptions{OnUpdate: capture(rt, &log)})
		end = ended{Result: res, Err: err, AtMs: sinceEpochMs(rt)}
	})
	if len(log) != 0 {
		t.Errorf("output = %v; want none from a process killed at its start", log)
	}
	if want := (ended{Result: agent.ExecResult{ExitCode: proc.ExitCodeKilled, Killed: true}}); !cmp.Equal(want, end) {
		t.Errorf("ended = %+v; want %+v", end, want)
	}
}

func TestHangingProcessRunsUntilKilled(t *testing.T) {
	scripts := one("serve", proc.Script{Chunks: []proc.Chunk{stdout(5, "listening")}, Hang: true})
	log, end := execOnce(t, 1, scripts, "serve", 60_000)
	if want := []out{{5, "stdout", "listening"}}; !cmp.Equal(want, log) {
		t.Errorf("output = %v; want %v", log, want)
	}
	if want := (ended{Result: agent.ExecResult{ExitCode: proc.ExitCodeKilled, Killed: true}, AtMs: 60_000}); !cmp.Equal(want, end) {
		t.Errorf("ended = %+v; want %+v", end, want)
	}
}

func TestHangingProcessNobodyKillsIsADeadlockNamingIt(t *testing.T) {
	s := sim.New(sim.Options{Seed: 1})
	err := s.Run(context.Background(), func(ctx context.Context) {
		env := proc.New(s.Runtime(), one("serve", proc.Script{Hang: true}))
		env.Exec(ctx, "serve", agent.ExecOptions{})
	})
	var d *sim.DeadlockError
	if !errors.As(err, &d) || !strings.Contains(err.Error(), `"serve" hangs until killed`) {
		t.Fatalf("err = %v; want a deadlock naming the hung process", err)
	}
}

func TestIgnoredKillKeepsRunningForItsWindowThenDies(t *testing.T) {
	chunks := []proc.Chunk{stdout(10, "10"), stdout(10, "20"), stdout(10, "30"), stdout(10, "40"), stdout(10, "50")}
	for _, tc := range []struct {
		name   string
		script proc.Script
		killMs int
		want   []out
		end    ended
	}{
		{
			// Killed at 25, dies at 40: the chunk at 30 still arrives; the
			// one at 40 is due as the kill lands and does not.
			name:   "chunks within the window arrive",
			script: proc.Script{Chunks: chunks, IgnoreKillMs: 15},
			killMs: 25,
			want:   []out{{10, "stdout", "10"}, {20, "stdout", "20"}, {30, "stdout", "30"}},
			end:    ended{Result: agent.ExecResult{ExitCode: proc.ExitCodeKilled, Killed: true}, AtMs: 40},
		},
		{
			name:   "a hang dies when the window ends",
			script: proc.Script{Chunks: chunks[:1], Hang: true, IgnoreKillMs: 500},
			killMs: 100,
			want:   []out{{10, "stdout", "10"}},
			end:    ended{Result: agent.ExecResult{ExitCode: proc.ExitCodeKilled, Killed: true}, AtMs: 600},
		},
		{
			name:   "a script that ends within the window exits on its own",
			script: proc.Script{Chunks: chunks[:2], ExitCode: 3, IgnoreKillMs: 100},
			killMs: 15,
			want:   []out{{10, "stdout", "10"}, {20, "stdout", "20"}},
			end:    ended{Result: agent.ExecResult{ExitCode: 3}, AtMs: 20},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, end := execOnce(t, 1, one("slow", tc.script), "slow", tc.killMs)
			if diff := cmp.Diff(tc.want, log); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if !cmp.Equal(tc.end, end) {
				t.Errorf("ended = %+v; want %+v", end, tc.end)
			}
		})
	}
}

func TestCrashIsAnErrorAfterTheChunks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []proc.Chunk
		want   []out
		atMs   int64
	}{
		{"cannot start", nil, nil, 0},
		{"dies after output", []proc.Chunk{stderr(30, "fatal")}, []out{{30, "stderr", "fatal"}}, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, end := execOnce(t, 1, one("gcc", proc.Script{Chunks: tc.chunks, Crash: "exec format error"}), "gcc", -1)
			if !cmp.Equal(tc.want, log) {
				t.Errorf("output = %v; want %v", log, tc.want)
			}
			var crash *proc.CrashError
			if !errors.As(end.Err, &crash) || crash.Command != "gcc" || end.Err.Error() != "proc: gcc: exec format error" {
				t.Fatalf("err = %v; want a *proc.CrashError %q", end.Err, "proc: gcc: exec format error")
			}
			if end.Result.ExitCode != proc.ExitCodeCrashed || end.AtMs != tc.atMs {
				t.Errorf("ended = %+v; want exit code %d at %dms", end, proc.ExitCodeCrashed, tc.atMs)
			}
		})
	}
}

func TestUnknownCommandIsNotFoundNotAnError(t *testing.T) {
	log, end := execOnce(t, 1, one("make", proc.Script{}), "make test", -1)
	if want := []out{{0, "stderr", "make test: command not found"}}; !cmp.Equal(want, log) {
		t.Errorf("output = %v; want %v", log, want)
	}
	if want := (ended{Result: agent.ExecResult{ExitCode: proc.ExitCodeNotFound}}); !cmp.Equal(want, end) {
		t.Errorf("ended = %+v; want %+v", end, want)
	}
}

func TestFileSystem(t *testing.T) {
	type step struct {
		what string
		err  error
		got  any
		want any
	}
	var steps []step
	var files map[string]string
	simulate(t, 1, func(ctx context.Context, s *sim.Sim) {
		env := proc.New(s.Runtime(), proc.Scripts{Files: map[string]string{"etc/motd": "hello"}})
		check := func(what string, got, want any, err error) { steps = append(steps, step{what, err, got, want}) }

		data, err := env.ReadFile(ctx, "/etc/motd")
		check("initial file, relative key resolved against /", string(data), "hello", err)
		data[0] = 'J' // the caller owns the returned copy
		data, err = env.ReadFile(ctx, "/etc/../etc/./motd")
		check("read returns a copy; path is cleaned", string(data), "hello", err)

		buf := []byte("v1")
		err = env.WriteFile(ctx, "notes/todo.txt", buf)
		buf[1] = '2' // WriteFile keeps its own copy
		data, _ = env.ReadFile(ctx, "/notes/todo.txt")
		check("write stores a copy under the resolved path", string(data), "v1", err)

		err = env.WriteFile(ctx, "/notes/todo.txt", []byte("replaced"))
		info, _ := env.Stat(ctx, "notes//todo.txt")
		check("stat after overwrite", info, agent.FileInfo{Path: "/notes/todo.txt", Size: 8}, err)

		files = env.Files()
		files["/etc/motd"] = "changed" // Files returns a copy
		files = env.Files()
	})
	for _, st := range steps {
		if st.err != nil || !cmp.Equal(st.want, st.got) {
			t.Errorf("%s: got %v, %v; want %v, nil", st.what, st.got, st.err, st.want)
		}
	}
	if want := map[string]string{"/etc/motd": "hello", "/notes/todo.txt": "replaced"}; !cmp.Equal(want, files) {
		t.Errorf("Files() = %v; want %v", files, want)
	}
}

func TestMissingFileIsNotExistNamingThePath(t *testing.T) {
	var readErr, statErr, emptyErr, rootErr error
	simulate(t, 1, func(ctx context.Context, s *sim.Sim) {
		env := proc.New(s.Runtime(), proc.Scripts{})
		_, readErr = env.ReadFile(ctx, "a/missing.txt")
		_, statErr = env.Stat(ctx, "/a/missing.txt")
		_, emptyErr = env.ReadFile(ctx, "")
		rootErr = env.WriteFile(ctx, "/", []byte("x"))
	})
	for _, err := range []error{readErr, statErr} {
		if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, agent.ErrNotExist) || !strings.Contains(err.Error(), "/a/missing.txt") || !strings.HasPrefix(err.Error(), "proc: ") {
			t.Errorf("err = %v; want a proc: error wrapping fs.ErrNotExist naming /a/missing.txt", err)
		}
	}
	for _, err := range []error{emptyErr, rootErr} {
		if !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("err = %v; want one wrapping fs.ErrInvalid", err)
		}
	}
}

// TestFilesAreSafeUnderTheRealRuntime is the reason Env has a mutex: with
// the real runtime, tool calls may touch files concurrently. Run with -race.
func TestFilesAreSafeUnderTheRealRuntime(t *testing.T) {
	env := proc.New(core.RealRuntime(), proc.Scripts{})
	ctx := context.Background()
	const writers = 8
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			p := fmt.Sprintf("/f%d", i)
			if err := env.WriteFile(ctx, p, []byte(p)); err != nil {
				t.Error(err)
			}
			env.ReadFile(ctx, p)
			env.Stat(ctx, p)
			env.Files()
		})
	}
	wg.Wait()
	if got := len(env.Files()); got != writers {
		t.Fatalf("%d files; want %d", got, writers)
	}
}

func TestScriptsJSONRoundTrip(t *testing.T) {
	const text = `{
		"commands": {
			"make": {"chunks": [{"afterMs": 5, "stream": "stdout", "data": "ok\n"}], "exitCode": 2},
			"serve": {"hang": true, "ignoreKillMs": 300},
			"gcc": {"crash": "exec format error"}
		},
		"files": {"/src/main.c": "int main;"}
	}`
	want := proc.Scripts{
		Commands: map[string]proc.Script{
			"make":  {Chunks: []proc.Chunk{stdout(5, "ok\n")}, ExitCode: 2},
			"serve": {Hang: true, IgnoreKillMs: 300},
			"gcc":   {Crash: "exec format error"},
		},
		Files: map[string]string{"/src/main.c": "int main;"},
	}
	got, err := proc.ParseScripts([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("parsed (-want +got):\n%s", diff)
	}
	encoded, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	again, err := proc.ParseScripts(encoded)
	if err != nil {
		t.Fatalf("parse of %s: %v", encoded, err)
	}
	if diff := cmp.Diff(got, again, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("round trip through %s (-first +second):\n%s", encoded, diff)
	}
}

func TestParseScriptsIsStrict(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"unknown field", `{"commands": {"ls": {"colour": "red"}}}`, `unknown field "colour"`},
		{"field matching only by case", `{"commands": {"ls": {"chunks": [{"AfterMs": 1, "stream": "stdout", "data": ""}]}}}`,
			`commands["ls"].chunks[0]: unknown field "AfterMs"`},
		{"top-level field matching only by case", `{"Commands": {}}`, `unknown field "Commands"`},
		{"not an object", `[]`, "proc: scripts"},
		{"trailing data", `{"commands": {}} {}`, "trailing data"},
		{"invalid script", `{"commands": {"ls": {"chunks": [{"stream": "stdin", "data": ""}]}}}`, `commands["ls"].chunks[0].stream`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := proc.ParseScripts([]byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "proc: ") {
				t.Fatalf("err = %v; want a proc: error mentioning %s", err, tc.want)
			}
			s := sim.New(sim.Options{Seed: 1})
			if _, err := proc.NewFromJSON(s.Runtime(), []byte(tc.text)); err == nil {
				t.Fatal("NewFromJSON accepted what ParseScripts rejects")
			}
		})
	}
}

func TestValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   proc.Script
		cmd  string
		want string
	}{
		{"negative delay", proc.Script{Chunks: []proc.Chunk{stdout(1, ""), stdout(1, ""), stdout(-5, "")}}, "make",
			`proc: commands["make"].chunks[2].afterMs: negative delay -5`},
		{"negative kill window", proc.Script{IgnoreKillMs: -1}, "make",
			`proc: commands["make"].ignoreKillMs: negative delay -1`},
		{"unknown stream", proc.Script{Chunks: []proc.Chunk{{Stream: "stdin"}}}, "make",
			`proc: commands["make"].chunks[0].stream: unknown stream "stdin"`},
		{"missing stream", proc.Script{Chunks: []proc.Chunk{{Data: "x"}}}, "make",
			`proc: commands["make"].chunks[0].stream: unknown stream ""`},
		{"hang with exit code", proc.Script{Hang: true, ExitCode: 1}, "make",
			`proc: commands["make"].exitCode: 1 on a script that hangs`},
		{"hang with crash", proc.Script{Hang: true, Crash: "boom"}, "make",
			`proc: commands["make"].crash: set on a script that hangs`},
		{"crash with exit code", proc.Script{Crash: "boom", ExitCode: 2}, "make",
			`proc: commands["make"].exitCode: 2 on a script that crashes`},
		{"empty command name", proc.Script{}, "",
			`proc: commands[""]: empty command name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := one(tc.cmd, tc.sc).Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v; want %s", err, tc.want)
			}
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Fatalf("New panicked with %v; want the validation message %s", r, tc.want)
				}
			}()
			proc.New(sim.New(sim.Options{Seed: 1}).Runtime(), one(tc.cmd, tc.sc))
		})
	}
}

func TestValidateChecksFilePaths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"empty path", map[string]string{"": "x"}, `proc: files[""]: empty path`},
		{"root", map[string]string{"/": "x"}, `proc: files["/"]: /: is the root directory`},
		{"two names for one file", map[string]string{"/a": "1", "a": "2"}, `proc: files["a"]: same file /a as files["/a"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := proc.Scripts{Files: tc.files}.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v; want %s", err, tc.want)
			}
		})
	}
}

func TestValidateReportsEveryProblemInOrder(t *testing.T) {
	err := proc.Scripts{Commands: map[string]proc.Script{
		"b": {IgnoreKillMs: -1},
		"a": {Chunks: []proc.Chunk{{AfterMs: -1, Stream: "stdout"}}},
	}}.Validate()
	want := "proc: commands[\"a\"].chunks[0].afterMs: negative delay -1\n" +
		"proc: commands[\"b\"].ignoreKillMs: negative delay -1"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v; want\n%s", err, want)
	}
}

// concurrentScenario runs two processes on two actors while a third kills
// the second, and returns the merged output log, both endings and the
// trace. Nothing in it is due at the same virtual time as anything else, so
// its observable output is the same under every seed.
func concurrentScenario(t *testing.T, seed uint64) ([]string, map[string]ended, *sim.Trace) {
	t.Helper()
	scripts := proc.Scripts{Commands: map[string]proc.Script{
		"A": {Chunks: []proc.Chunk{stdout(10, "a1"), stdout(20, "a2"), stderr(20, "a3")}, ExitCode: 1},
		"B": {Chunks: []proc.Chunk{stdout(20, "b1"), stdout(20, "b2"), stdout(20, "b3")}, Hang: true, IgnoreKillMs: 5},
	}}
	trace := sim.NewTrace(nil, true)
	s := sim.New(sim.Options{Seed: seed, Trace: trace})
	var log []string
	ends := map[string]ended{}
	err := s.Run(context.Background(), func(ctx context.Context) {
		rt := s.Runtime()
		env := proc.New(rt, scripts, proc.WithRecorder(s))
		done := rt.NewEvent("both exited")
		left := 2
		bctx, killB := context.WithCancel(ctx)
		defer killB()
		for _, name := range []string{"A", "B"} {
			pctx := ctx
			if name == "B" {
				pctx = bctx
			}
			rt.Go(ctx, "run "+name, func(ctx context.Context) {
				opts := agent.ExecOptions{OnUpdate: func(c agent.OutputChunk) {
					log = append(log, fmt.Sprintf("%d %s %s %s", sinceEpochMs(rt), name, c.Stream, c.Data))
				}}
				res, err := env.Exec(pctx, name, opts)
				ends[name] = ended{Result: res, Err: err, AtMs: sinceEpochMs(rt)}
				if left--; left == 0 {
					done.Set()
				}
			})
		}
		rt.Sleep(ctx, 45*time.Millisecond)
		killB()
		done.Wait(ctx)
	})
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return log, ends, trace
}

func TestConcurrentProcessesInterleaveByVirtualTime(t *testing.T) {
	log, ends, _ := concurrentScenario(t, 1)
	wantLog := []string{
		"10 A stdout a1",
		"20 B stdout b1",
		"30 A stdout a2",
		"40 B stdout b2",
		"50 A stderr a3",
	}
	if diff := cmp.Diff(wantLog, log); diff != "" {
		t.Errorf("merged output (-want +got):\n%s", diff)
	}
	wantEnds := map[string]ended{
		"A": {Result: agent.ExecResult{ExitCode: 1}, AtMs: 50},
		"B": {Result: agent.ExecResult{ExitCode: proc.ExitCodeKilled, Killed: true}, AtMs: 50}, // killed at 45, 5ms window
	}
	if diff := cmp.Diff(wantEnds, ends); diff != "" {
		t.Errorf("endings (-want +got):\n%s", diff)
	}
}

func TestSameScenarioUnderFiftySeedsGivesIdenticalOutput(t *testing.T) {
	const seeds = 50
	firstLog, firstEnds, _ := concurrentScenario(t, 0)
	for seed := range uint64(seeds) {
		log, ends, trace := concurrentScenario(t, seed)
		if diff := cmp.Diff(firstLog, log); diff != "" {
			t.Fatalf("seed %d: output differs from seed 0 (-seed0 +this):\n%s", seed, diff)
		}
		if diff := cmp.Diff(firstEnds, ends); diff != "" {
			t.Fatalf("seed %d: endings differ from seed 0 (-seed0 +this):\n%s", seed, diff)
		}
		// The interleaving may differ between seeds; the same seed must
		// replay it byte for byte.
		if _, _, replay := concurrentScenario(t, seed); replay.Digest() != trace.Digest() {
			t.Fatalf("seed %d: replay trace differs:\n%s\n---\n%s", seed,
				strings.Join(trace.Lines(), "\n"), strings.Join(replay.Lines(), "\n"))
		}
	}
}

func TestTraceRecordsEveryProcessMilestone(t *testing.T) {
	type record struct {
		Kind      string
		PID       int    `json:"pid"`
		Command   string `json:"command"`
		ElapsedMs int64  `json:"elapsedMs"`
		GraceMs   int64  `json:"graceMs"`
		ExitCode  int    `json:"exitCode"`
		Killed    bool   `json:"killed"`
	}
	_, _, trace := concurrentScenario(t, 3)
	var got []record
	pids := map[string]int{}
	for _, line := range trace.Lines() {
		var ev struct {
			Kind   string          `json:"k"`
			Detail json.RawMessage `json:"detail"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(ev.Kind, "proc.") {
			continue
		}
		r := record{Kind: ev.Kind}
		if err := json.Unmarshal(ev.Detail, &r); err != nil {
			t.Fatal(err)
		}
		// Which process starts first (and so gets pid 1) is the seed's
		// choice; what matters is that each keeps its pid.
		if r.Kind == "proc.start" {
			pids[r.Command] = r.PID
		}
		if r.PID != pids[r.Command] {
			t.Errorf("%s of %s has pid %d; it started as %d", r.Kind, r.Command, r.PID, pids[r.Command])
		}
		r.PID = 0
		got = append(got, r)
	}
	if pids["A"] == pids["B"] || pids["A"]+pids["B"] != 3 {
		t.Errorf("pids = %v; want 1 and 2", pids)
	}
	want := []record{
		{Kind: "proc.start", Command: "A"},
		{Kind: "proc.start", Command: "B"},
		{Kind: "proc.kill", Command: "B", ElapsedMs: 45, GraceMs: 5},
		{Kind: "proc.exit", Command: "A", ElapsedMs: 50, ExitCode: 1},
		{Kind: "proc.exit", Command: "B", ElapsedMs: 50, ExitCode: proc.ExitCodeKilled, Killed: true},
	}
	// Both starts and both exits fall at the same virtual time, in an order
	// the seed picks; order within a time by kind and command.
	byTime := cmpopts.SortSlices(func(a, b record) bool {
		if a.ElapsedMs != b.ElapsedMs {
			return a.ElapsedMs < b.ElapsedMs
		}
		if a.Kind != b.Kind {
			return a.Kind > b.Kind // start, kill, exit
		}
		return a.Command < b.Command
	})
	if diff := cmp.Diff(want, got, byTime); diff != "" {
		t.Errorf("proc trace records (-want +got):\n%s", diff)
	}
}

// FuzzParseScripts holds the parser to two promises: whatever it accepts is
// valid (New does not panic on it) and survives a round trip through its
// own encoding unchanged.
func FuzzParseScripts(f *testing.F) {
	f.Add([]byte(`{"commands": {"make": {"chunks": [{"afterMs": 5, "stream": "stdout", "data": "ok"}], "exitCode": 2}}}`))
	f.Add([]byte(`{"commands": {"serve": {"hang": true, "ignoreKillMs": 300}}, "files": {"a": "b"}}`))
	f.Add([]byte(`{"commands": {"gcc": {"crash": "boom"}}}`))
	f.Add([]byte(`{"commands": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := proc.ParseScripts(data)
		if err != nil {
			return
		}
		proc.New(sim.New(sim.Options{Seed: 1}).Runtime(), s)
		encoded, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		again, err := proc.ParseScripts(encoded)
		if err != nil {
			t.Fatalf("accepted %q but not its own encoding %s: %v", data, encoded, err)
		}
		if diff := cmp.Diff(s, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip of %q (-first +second):\n%s", data, diff)
		}
	})
}

// Output past SpillAfter is kept whole in a file of the fake file system,
// whichever way the process ends; output within it, or with no SpillAfter,
// spills nothing.
func TestOutputPastSpillAfterIsKeptInAFile(t *testing.T) {
	chunks := []proc.Chunk{stdout(1, "0123456789"), stdout(1, "abcdef")}
	for _, tc := range []struct {
		name       string
		script     proc.Script
		spillAfter int
		spilled    bool
	}{
		{"exit past the limit", proc.Script{Chunks: chunks, ExitCode: 3}, 12, true},
		{"crash past the limit", proc.Script{Chunks: chunks, Crash: "segfault"}, 12, true},
		{"within the limit", proc.Script{Chunks: chunks}, 16, false},
		{"no limit", proc.Script{Chunks: chunks}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			simulate(t, 1, func(ctx context.Context, s *sim.Sim) {
				env := proc.New(s.Runtime(), one("gen", tc.script))
				res, _ := env.Exec(ctx, "gen", agent.ExecOptions{SpillAfter: tc.spillAfter})
				files := env.Files()
				if !tc.spilled {
					if res.SpillPath != "" || len(files) != 0 {
						t.Fatalf("spill path %q, files %v; want none", res.SpillPath, files)
					}
					return
				}
				if res.SpillPath != proc.SpillPath(1) || files[res.SpillPath] != "0123456789abcdef" {
					t.Fatalf("spill path %q, files %v; want the whole output at %s", res.SpillPath, files, proc.SpillPath(1))
				}
			})
		})
	}
}
