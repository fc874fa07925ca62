package kit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// PortError is a port that broke the protocol: it exited, sent a line that
// is not a reply, answered with an error, or did not answer in time. It
// names the scenario and the request.
type PortError struct {
	Scenario string
	Request  string // the request's line: "open", "action 3: drive c0", "outcome"
	Reason   string
	Stderr   string // the port's last stderr lines, if any
}

func (e *PortError) Error() string {
	s := fmt.Sprintf("port: scenario %s, %s: %s", e.Scenario, e.Request, e.Reason)
	if e.Stderr != "" {
		s += "; its stderr ends: " + e.Stderr
	}
	return s
}

// ReplyTimeout is how long a runner waits for one reply of a port (wall
// time: a port is another process).
const ReplyTimeout = 2 * time.Minute

// stderrKeepMax is how much of a port's stderr a PortError quotes, in bytes.
const stderrKeepMax = 2048

// Port is a running port process.
type Port struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan []byte
	stderr  *tail
	exited  chan struct{}
	waitErr error
	timeout time.Duration
}

// StartPort starts argv as a port.
func StartPort(ctx context.Context, argv []string) (*Port, error) {
	if len(argv) == 0 {
		return nil, errors.New("port: no command")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &Port{cmd: cmd, stdin: stdin, lines: make(chan []byte), stderr: &tail{}, exited: make(chan struct{}), timeout: ReplyTimeout}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("port: start %s: %w", argv[0], err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), requestLineMax)
		for sc.Scan() {
			p.lines <- bytes.Clone(sc.Bytes())
		}
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Close asks the port to end and waits for it, discarding what it still
// prints; a port that does not end within the reply timeout is killed.
func (p *Port) Close() error {
	_ = json.NewEncoder(p.stdin).Encode(Request{Type: RequestClose})
	_ = p.stdin.Close()
	timer := time.NewTimer(p.timeout)
	defer timer.Stop()
	for {
		select {
		case <-p.lines:
		case <-p.exited:
			return nil
		case <-timer.C:
			_ = p.cmd.Process.Kill()
			timer.Reset(p.timeout)
		}
	}
}

// Exited reports whether the port process has ended.
func (p *Port) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// roundTrip sends one request and reads its reply.
func (p *Port) roundTrip(scenario, what string, req Request) (Reply, error) {
	perr := func(reason string) *PortError {
		return &PortError{Scenario: scenario, Request: what, Reason: reason, Stderr: p.stderr.String()}
	}
	line, err := json.Marshal(req)
	if err != nil {
		return Reply{}, err
	}
	if _, err := p.stdin.Write(append(line, '\n')); err != nil {
		select {
		case <-p.exited:
			return Reply{}, perr(fmt.Sprintf("the port exited (%v)", p.waitErr))
		case <-time.After(time.Second):
		}
		return Reply{}, perr("cannot write to the port: " + err.Error())
	}
	select {
	case b := <-p.lines:
		var r Reply
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(&r); err != nil {
			return Reply{}, perr(fmt.Sprintf("the port answered %q, which is not a reply: %v", clip(string(b)), err))
		}
		return r, nil
	case <-p.exited:
		return Reply{}, perr(fmt.Sprintf("the port exited (%v)", p.waitErr))
	case <-time.After(p.timeout):
		return Reply{}, perr(fmt.Sprintf("no reply in %s", p.timeout))
	}
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// Options tune a conformance run.
type Options struct {
	// Diffs is how many differences to report per scenario (0: one).
	Diffs int
	// Timeout is how long to wait for one reply (0: ReplyTimeout).
	Timeout time.Duration
}

// Verdict is one scenario's result on a port.
type Verdict struct {
	Scenario    string
	Diffs       []Difference // none: the outcome matched
	Unsupported string       // the port cannot express the scenario
	Err         error        // the port broke the protocol
}

// RunScenario plays one scenario on the port and diffs its normalized
// outcome against the scenario's expected journal.
func (p *Port) RunScenario(sc *Scenario, diffs int) Verdict {
	v := Verdict{Scenario: sc.Name}
	open, actions, err := sc.Requests()
	if err != nil {
		v.Err = err
		return v
	}
	r, err := p.roundTrip(sc.Name, "open", open)
	switch {
	case err != nil:
		v.Err = err
		return v
	case r.Unsupported != "":
		v.Unsupported = r.Unsupported
		return v
	case !r.OK:
		v.Err = &PortError{Scenario: sc.Name, Request: "open", Reason: "the port refused: " + r.Error}
		return v
	}
	for _, a := range actions {
		what := fmt.Sprintf("action %d (%s)", a.Index, a.Line)
		r, err := p.roundTrip(sc.Name, what, a)
		switch {
		case err != nil:
			v.Err = err
			return v
		case r.Unsupported != "":
			v.Unsupported = r.Unsupported
			_, _ = p.roundTrip(sc.Name, "outcome", Request{Type: RequestOutcome}) // end the scenario
			return v
		case !r.OK:
			v.Err = &PortError{Scenario: sc.Name, Request: what, Reason: "the port failed: " + r.Error}
			return v
		}
	}
	r, err = p.roundTrip(sc.Name, "outcome", Request{Type: RequestOutcome})
	switch {
	case err != nil:
		v.Err = err
		return v
	case !r.OK || r.Outcome == nil:
		v.Err = &PortError{Scenario: sc.Name, Request: "outcome", Reason: "no outcome: " + r.Error}
		return v
	}
	v.Diffs, err = Diffs(Journal(Normalize(*r.Outcome)), sc.Expected, max(diffs, 1))
	if err != nil {
		v.Err = fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	return v
}

// Summary counts a run's verdicts.
type Summary struct {
	Scenarios, Passed, Differ, Unsupported, Failed int
}

// OK reports whether every scenario the port ran matched.
func (s Summary) OK() bool { return s.Differ == 0 && s.Failed == 0 }

// Conform runs every scenario on the port argv (restarting it after it
// exits), printing one line per scenario and a closing summary to w:
//
//	✓ basic-turn
//	✗ abort-idle: conversations[0].tasks[0].status: got "done"; want "aborted"
//	- subagent-run: unsupported: no subagent tool
//	! crash-reopen: port: scenario crash-reopen, action 2 (reopen): the port exited (exit status 1)
//	DONE 73 scenarios: 70 ✓, 1 differ, 1 unsupported, 1 failed
//
// With opts.Diffs above one, the further differences of a scenario follow
// its line, indented.
func Conform(ctx context.Context, argv []string, scs []*Scenario, w io.Writer, opts Options) (Summary, error) {
	var sum Summary
	var p *Port
	defer func() {
		if p != nil {
			_ = p.Close()
		}
	}()
	for _, sc := range scs {
		if p == nil || p.Exited() {
			var err error
			if p, err = StartPort(ctx, argv); err != nil {
				return sum, err
			}
			if opts.Timeout > 0 {
				p.timeout = opts.Timeout
			}
		}
		v := p.RunScenario(sc, opts.Diffs)
		sum.Scenarios++
		switch {
		case v.Err != nil:
			sum.Failed++
			fmt.Fprintf(w, "! %s: %v\n", sc.Name, v.Err)
			_ = p.Close() // a port that broke the protocol starts again
			p = nil
		case v.Unsupported != "":
			sum.Unsupported++
			fmt.Fprintf(w, "- %s: unsupported: %s\n", sc.Name, v.Unsupported)
		case len(v.Diffs) > 0:
			sum.Differ++
			fmt.Fprintf(w, "✗ %s: %s\n", sc.Name, &v.Diffs[0])
			for _, d := range v.Diffs[1:] {
				fmt.Fprintf(w, "    %s\n", &d)
			}
		default:
			sum.Passed++
			fmt.Fprintf(w, "✓ %s\n", sc.Name)
		}
	}
	fmt.Fprintf(w, "DONE %d scenarios: %d ✓, %d differ, %d unsupported, %d failed\n", sum.Scenarios, sum.Passed, sum.Differ, sum.Unsupported, sum.Failed)
	return sum, nil
}

// tail keeps the last stderrKeepMax bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > stderrKeepMax {
		t.buf = t.buf[len(t.buf)-stderrKeepMax:]
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
