package proc

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
)

// Exit codes of processes that did not choose their own. They are the
// shell's, so that tool output reads the way a person expects.
const (
	// ExitCodeNotFound is the status of a command no script knows.
	ExitCodeNotFound = 127
	// ExitCodeKilled is the status of a killed process: 128 + SIGKILL(9),
	// as a shell reports it. It is always paired with Killed: true.
	ExitCodeKilled = 137
	// ExitCodeCrashed is the status that accompanies a *CrashError: there
	// is no exit status, as with os.ProcessState.ExitCode for a process
	// that did not exit.
	ExitCodeCrashed = -1
)

// Recorder receives process milestones for the run's trace. *sim.Sim
// satisfies it; proc depends on this one method rather than on package sim
// so that it also works with the real runtime and no trace.
type Recorder interface {
	Record(kind string, detail any)
}

// Option configures an Env.
type Option func(*Env)

// WithRecorder writes every process start ("proc.start"), kill signal
// ("proc.kill"), exit ("proc.exit") and crash ("proc.crash") to r.
func WithRecorder(r Recorder) Option {
	return func(e *Env) { e.rec = r }
}

// Env is a scripted agent.ExecutionEnv. Its scripts are fixed at New; its
// files change as the harness writes them.
type Env struct {
	rt       core.Runtime
	commands map[string]Script // read-only after New
	rec      Recorder          // nil: record nothing

	mu    sync.Mutex // guards files and pids; see fs.go for why it exists
	files map[string]string
	pids  int
}

var _ agent.ExecutionEnv = (*Env)(nil)

// New returns an environment that runs scripts on rt. Invalid scripts are a
// programmer error and panic with the validation message; use NewFromJSON
// for scripts that come from outside the program.
func New(rt core.Runtime, scripts Scripts, opts ...Option) *Env {
	if rt == nil {
		panic("proc: New needs a runtime: every wait goes through it")
	}
	if err := scripts.Validate(); err != nil {
		panic(err.Error())
	}
	s := scripts.clone()
	e := &Env{rt: rt, commands: s.Commands, files: make(map[string]string, len(s.Files))}
	for name, data := range s.Files {
		p, _ := resolve(name) // Validate checked every path
		e.files[p] = data
	}
	for _, o := range opts {
		o(e)
	}
	return e
}

// NewFromJSON parses and validates the JSON form of Scripts and returns an
// environment that runs them on rt.
func NewFromJSON(rt core.Runtime, data []byte, opts ...Option) (*Env, error) {
	s, err := ParseScripts(data)
	if err != nil {
		return nil, err
	}
	return New(rt, s, opts...), nil
}

// CrashError is a process that could not be started or died without an
// exit status: the script's Crash message.
type CrashError struct {
	Command string
	Message string
}

func (e *CrashError) Error() string {
	return fmt.Sprintf("proc: %s: %s", e.Command, e.Message)
}

// Exec runs the script of command (an exact match) and returns how it ended.
//
//   - Chunks go to opts.OnUpdate in order, each after its AfterMs of virtual
//     time. A zero delay emits in the same step, with no scheduling point,
//     as output read in one go would arrive.
//   - When ctx is done the process is killed: ExitCodeKilled, Killed true,
//     nil error, and no chunk that falls due after the kill. (A chunk due
//     at the very instant of the kill still arrives under the simulator,
//     whose timer and cancellation land together; with the real runtime it
//     is a race, as with a real process.) With
//     IgnoreKillMs it first keeps running that long — emitting the chunks
//     that fall due strictly before the kill lands — and if its script ends
//     within that window it exits on its own, with its own status.
//   - A ctx that is already done when Exec is called kills the process at
//     its start, the same way: there is one model of a kill, not two.
//   - A Hang script waits after its chunks until it is killed.
//   - A Crash script returns ExitCodeCrashed and a *CrashError after its
//     chunks.
//   - An unknown command is not an error: it prints "<command>: command not
//     found" on stderr and exits with ExitCodeNotFound, as a shell does.
//
// opts.Cwd is written to the trace; opts.Env is ignored, since scripts
// match on the command string alone.
func (e *Env) Exec(ctx context.Context, command string, opts agent.ExecOptions) (agent.ExecResult, error) {
	e.mu.Lock()
	e.pids++
	pid := e.pids
	e.mu.Unlock()
	p := &process{env: e, pid: pid, command: command, onUpdate: opts.OnUpdate, start: e.rt.Now(), spillAfter: opts.SpillAfter}
	e.record("proc.start", startRecord{PID: pid, Command: command, Cwd: opts.Cwd})
	script, ok := e.commands[command]
	if !ok {
		p.emit(agent.OutputChunk{Stream: StreamStderr, Data: command + ": command not found"})
		return p.exit(ExitCodeNotFound, false), nil
	}
	return p.run(ctx, script)
}

func (e *Env) record(kind string, detail any) {
	if e.rec != nil {
		e.rec.Record(kind, detail)
	}
}

// process is one running script. Times are kept as offsets from start, not
// as accumulated sleeps, so that under the real runtime the output does not
// drift later and later behind the script.
type process struct {
	env      *Env
	pid      int
	command  string
	onUpdate func(agent.OutputChunk)
	start    time.Time

	killed bool      // the kill signal has arrived (ctx is done)
	death  time.Time // when a killed process dies; set with killed

	spillAfter int             // ExecOptions.SpillAfter
	output     strings.Builder // everything printed, kept only to spill
}

func (p *process) run(ctx context.Context, sc Script) (agent.ExecResult, error) {
	grace := time.Duration(sc.IgnoreKillMs) * time.Millisecond
	var due time.Duration // offset of the next chunk from the start
	for _, c := range sc.Chunks {
		due += time.Duration(c.AfterMs) * time.Millisecond
		if !p.liveUntil(ctx, p.start.Add(due), grace) {
			return p.exit(ExitCodeKilled, true), nil
		}
		p.emit(agent.OutputChunk{Stream: c.Stream, Data: c.Data})
	}
	if sc.Hang {
		p.hang(ctx, grace)
		return p.exit(ExitCodeKilled, true), nil
	}
	if sc.Crash != "" {
		p.env.record("proc.crash", crashRecord{PID: p.pid, Command: p.command, ElapsedMs: p.elapsedMs(), Error: sc.Crash})
		return agent.ExecResult{ExitCode: ExitCodeCrashed, SpillPath: p.spill()}, &CrashError{Command: p.command, Message: sc.Crash}
	}
	return p.exit(sc.ExitCode, false), nil
}

// liveUntil waits until at and reports whether the process is still alive
// then. A kill that arrives meanwhile starts the grace window; the process
// is alive at `at` only if that falls strictly before it dies.
func (p *process) liveUntil(ctx context.Context, at time.Time, grace time.Duration) bool {
	if !p.killed {
		if err := p.sleepUntil(ctx, at); err == nil {
			return true
		}
		p.kill(grace)
	}
	// A killed process ignores ctx for the rest of its life: the kill has
	// been delivered, and what remains is its scripted time to die.
	graceCtx := context.WithoutCancel(ctx)
	if !at.Before(p.death) {
		p.sleepUntil(graceCtx, p.death)
		return false
	}
	p.sleepUntil(graceCtx, at)
	return true
}

// hang blocks until the process is killed and then for its grace window.
// The event is never set: only ctx ends the wait, which is exactly what a
// hung process is, and under the simulator a hang nobody kills is reported
// as a deadlock naming this event.
func (p *process) hang(ctx context.Context, grace time.Duration) {
	if !p.killed {
		never := p.env.rt.NewEvent(fmt.Sprintf("proc %d %q hangs until killed", p.pid, p.command))
		_ = never.Wait(ctx) // returns only when ctx is done
		p.kill(grace)
	}
	p.sleepUntil(context.WithoutCancel(ctx), p.death)
}

// sleepUntil sleeps on the runtime until at, or until ctx is done. A time
// already reached costs no scheduling point.
func (p *process) sleepUntil(ctx context.Context, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := at.Sub(p.env.rt.Now())
	if d <= 0 {
		return nil
	}
	return p.env.rt.Sleep(ctx, d)
}

func (p *process) kill(grace time.Duration) {
	p.killed = true
	p.death = p.env.rt.Now().Add(grace)
	p.env.record("proc.kill", killRecord{PID: p.pid, Command: p.command, ElapsedMs: p.elapsedMs(), GraceMs: grace.Milliseconds()})
}

func (p *process) emit(c agent.OutputChunk) {
	if p.spillAfter > 0 {
		p.output.WriteString(c.Data)
	}
	if p.onUpdate != nil {
		p.onUpdate(c)
	}
}

// spill writes the whole output to SpillPath(pid) when it outgrew
// SpillAfter, and returns the path ("" when it did not).
func (p *process) spill() string {
	if p.spillAfter <= 0 || p.output.Len() <= p.spillAfter {
		return ""
	}
	path := SpillPath(p.pid)
	p.env.mu.Lock()
	p.env.files[path] = p.output.String()
	p.env.mu.Unlock()
	return path
}

// SpillPath is where the process with pid keeps its whole output when it
// outgrows ExecOptions.SpillAfter.
func SpillPath(pid int) string { return fmt.Sprintf("/spill/%d.log", pid) }

func (p *process) exit(code int, killed bool) agent.ExecResult {
	p.env.record("proc.exit", exitRecord{PID: p.pid, Command: p.command, ElapsedMs: p.elapsedMs(), ExitCode: code, Killed: killed})
	return agent.ExecResult{ExitCode: code, Killed: killed, SpillPath: p.spill()}
}

func (p *process) elapsedMs() int64 { return p.env.rt.Now().Sub(p.start).Milliseconds() }

// Trace details, one shape per kind so that every field is always present
// where it means something (an exit code of 0 is not omitted).
type (
	startRecord struct {
		PID     int    `json:"pid"`
		Command string `json:"command"`
		Cwd     string `json:"cwd,omitempty"`
	}
	killRecord struct {
		PID       int    `json:"pid"`
		Command   string `json:"command"`
		ElapsedMs int64  `json:"elapsedMs"`
		GraceMs   int64  `json:"graceMs"`
	}
	exitRecord struct {
		PID       int    `json:"pid"`
		Command   string `json:"command"`
		ElapsedMs int64  `json:"elapsedMs"`
		ExitCode  int    `json:"exitCode"`
		Killed    bool   `json:"killed,omitempty"`
	}
	crashRecord struct {
		PID       int    `json:"pid"`
		Command   string `json:"command"`
		ElapsedMs int64  `json:"elapsedMs"`
		Error     string `json:"error"`
	}
)
