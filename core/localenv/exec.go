package localenv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pico-go/pico/core/agent"
)

// shellPath is the shell commands run under. It is named by path, not
// looked up in PATH, so that an Env override of PATH cannot change which
// shell interprets the command.
const shellPath = "/bin/sh"

// outputDrainMax bounds how long Exec keeps reading after the shell has
// ended. Output still open then belongs to a process the shell left
// behind (a background job, a daemon) that may hold it for ever; Exec
// closes its end of the pipes and returns, as exec.Cmd.WaitDelay does.
// (Exec makes its own pipes rather than use exec.Cmd's, so WaitDelay has
// nothing to bound: Cmd.Wait only waits for the shell.)
const outputDrainMax = 500 * time.Millisecond

// stopSignal is a signal Exec sends to stop a process group.
type stopSignal int

const (
	stopNone stopSignal = iota
	stopTerm
	stopKill
)

func (s stopSignal) String() string {
	switch s {
	case stopTerm:
		return "TERM"
	case stopKill:
		return "KILL"
	}
	return ""
}

// Exec runs `/bin/sh -c command` and returns how it ended.
//
//   - The process runs in opts.Cwd (resolved inside the root like a file
//     path; "" is the root; outside it is an *EscapeError), with the
//     environment of this process overridden by opts.Env, stdin from
//     /dev/null, and in a process group of its own.
//   - Output is read as it is produced and delivered to opts.OnUpdate on
//     the goroutine that called Exec, never concurrently, in order within
//     each stream. A chunk never ends inside a UTF-8 sequence that the
//     next read completes.
//   - When ctx is done the whole group gets SIGTERM and, after the kill
//     grace (WithKillGrace), SIGKILL: the shell if it is still there, and
//     whatever of its group outlived it (a grandchild that ignores TERM). The result
//     is Killed, with the signal that ended it and 128 + its number (143,
//     137), and no error. A process that ends of its own accord in the
//     very instant it is cancelled may be reported as killed.
//   - A process that exits has its exit status; one ended by a signal Exec
//     did not send has that signal, 128 + its number, and Killed false.
//   - Once the shell has ended, what it left running keeps its output open
//     for at most outputDrainMax; then Exec stops reading and returns. It
//     does not kill what the shell left behind unless ctx is done first.
//   - With opts.SpillAfter > 0, an output longer than that is kept whole in
//     a spill file (WithSpillDir), named by ExecResult.SpillPath. If the
//     spill cannot be written, the result still says how the process ended
//     and the error is an *agent.SpillError saying what went wrong.
//   - A process that cannot be started is an error, and so is a ctx
//     already done: Exec starts nothing rather than start a process only to
//     kill it.
func (e *Env) Exec(ctx context.Context, command string, opts agent.ExecOptions) (agent.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return agent.ExecResult{}, fmt.Errorf("localenv: exec not started: %w", err)
	}
	dir := e.root
	if opts.Cwd != "" {
		d, err := e.resolve(opts.Cwd)
		if err != nil {
			return agent.ExecResult{}, err
		}
		dir = d
	}
	env, err := environ(opts.Env)
	if err != nil {
		return agent.ExecResult{}, err
	}
	attr, err := groupAttr()
	if err != nil {
		return agent.ExecResult{}, err
	}
	cmd := exec.Command(shellPath, "-c", command)
	cmd.Dir, cmd.Env, cmd.SysProcAttr = dir, env, attr
	p, err := start(cmd)
	if err != nil {
		return agent.ExecResult{}, fmt.Errorf("localenv: exec: %w", err)
	}
	return p.run(ctx, opts, e.killGrace, &spill{env: e, after: opts.SpillAfter})
}

// environ is os.Environ() with over applied, in sorted order so that the
// environment a process sees does not depend on map order. (exec.Cmd keeps
// the last value of a repeated name.)
func environ(over map[string]string) ([]string, error) {
	env := os.Environ()
	for _, k := range slices.Sorted(maps.Keys(over)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("localenv: exec: environment variable name %q is invalid", k)
		}
		env = append(env, k+"="+over[k])
	}
	return env, nil
}

// process is one started command: its pipes' read ends, the chunks its
// readers send, and its exit as the waiter reports it.
type process struct {
	cmd    *exec.Cmd
	pipes  [2]*os.File            // read ends of stdout and stderr
	chunks chan agent.OutputChunk // closed when both readers are done
	exited chan error             // cmd.Wait's result; buffered, sent once
}

// start starts cmd with stdout and stderr on pipes of its own and the
// goroutines that read them and wait for it.
func start(cmd *exec.Cmd) (*process, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	// The child has its own copies of the write ends; the readers see EOF
	// only once every holder has closed them, so this one must go now.
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	p := &process{cmd: cmd, pipes: [2]*os.File{outR, errR},
		chunks: make(chan agent.OutputChunk, chunkQueueMax), exited: make(chan error, 1)}
	var readers sync.WaitGroup
	readers.Go(func() { readStream(outR, streamStdout, p.chunks) })
	readers.Go(func() { readStream(errR, streamStderr, p.chunks) })
	go func() {
		readers.Wait()
		close(p.chunks)
	}()
	go func() { p.exited <- cmd.Wait() }()
	return p, nil
}

// closePipes closes the read ends, which ends the readers' blocked reads.
// Closing twice is harmless (the second reports os.ErrClosed, ignored).
func (p *process) closePipes() {
	for _, f := range p.pipes {
		f.Close()
	}
}

// run is Exec's loop, on the caller's goroutine: it delivers chunks, sends
// the stop signals, and returns once the output has ended (or been cut off)
// and the shell has been waited for. Every goroutine start started has
// ended by then.
//
// Signals go to the group only until the loop learns that the shell has
// been reaped. In the instant between reaping and learning, a group whose
// members are all gone may get a signal; its id is not reused while any
// member lives, and is reused that quickly by nothing in practice.
func (p *process) run(ctx context.Context, opts agent.ExecOptions, grace time.Duration, sp *spill) (agent.ExecResult, error) {
	defer p.closePipes()
	var (
		chunks  = p.chunks
		exited  = p.exited
		done    = ctx.Done()
		kill    <-chan time.Time // the grace has run out
		drain   <-chan time.Time // the shell has ended this long ago
		sent    = stopNone       // the last stop signal sent
		waitErr error
	)
	var timers []*time.Timer // each case that starts one runs at most once
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
	}()
	timer := func(d time.Duration) <-chan time.Time {
		t := time.NewTimer(d)
		timers = append(timers, t)
		return t.C
	}
	signal := func(s stopSignal) {
		if err := signalGroup(p.cmd.Process.Pid, s); err != nil {
			// The group cannot be signalled (it should always be
			// ours to): stop the shell at least, so that Exec returns.
			p.cmd.Process.Kill()
		}
		sent = s
	}
	// Once TERM went out, the loop also waits for the grace to end, so
	// that what the shell started (a grandchild that ignores TERM, one
	// whose output goes elsewhere) gets its KILL too.
	for chunks != nil || exited != nil || kill != nil {
		select {
		case c, ok := <-chunks:
			if !ok {
				chunks = nil
				continue
			}
			sp.write(c.Data)
			if opts.OnUpdate != nil {
				opts.OnUpdate(c)
			}
		case waitErr = <-exited:
			exited = nil
			if kill == nil { // no TERM pending: bound the leftovers' output
				drain = timer(outputDrainMax)
			}
		case <-done:
			done = nil
			if exited == nil { // the shell has ended; stop waiting for its leftovers
				p.closePipes()
				continue
			}
			signal(stopTerm)
			kill = timer(grace)
		case <-kill:
			kill = nil
			if exited != nil {
				signal(stopKill)
			} else {
				// The shell is gone; the rest of its group may not be.
				_ = signalGroup(p.cmd.Process.Pid, stopKill)
				drain = timer(outputDrainMax)
			}
		case <-drain:
			drain = nil
			p.closePipes()
		}
	}
	spillPath, spillErr := sp.finish()
	ps := p.cmd.ProcessState
	if ps == nil { // Wait failed without the process having been waited
		return agent.ExecResult{}, errors.Join(fmt.Errorf("localenv: exec: wait: %w", waitErr), spillErr)
	}
	code, sig := endOf(ps)
	res := agent.ExecResult{ExitCode: code, Signal: sig, Killed: sent != stopNone, SpillPath: spillPath}
	if res.Killed && res.Signal == "" {
		// It exited with a status of its own after the signal, from a
		// handler: the signal still ended it.
		res.Signal = sent.String()
	}
	if spillErr != nil {
		return res, &agent.SpillError{Err: spillErr}
	}
	return res, nil
}
