package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// The shell-call rule (§8.3, §8.6): a bash call, or a job tool's wait,
// that saw its job end reports that end to the model. Its result's details
// name the job with the status and exit code the job settled with, and the
// result is an error exactly when the run went badly, its text ending with
// the line that says how: "job N was stopped" (killed), "job N was lost:
// the session stopped while it ran" (lost), "job N failed" (its output
// says it failed, a crash), "exit code C" (any other code but 0). A call
// that saw its job still running is no error.

// ruleShellCall: a shell call reports its job's end as the job ended.
const ruleShellCall oracleRule = "a-shell-call-reports-its-job"

// jobEnd is how a job's last run ended, from its settlement at seq (0:
// one the store showed a restarted process, settled before it started).
type jobEnd struct {
	status   string
	exitCode *int
	failed   bool // its output says the run failed
	seq      storage.ID
}

// jobCall is a job tool call's command and the job it names.
type jobCall struct {
	command string
	job     storage.ID
}

// jobSettled notes how job w.ID ended, settled at seq.
func (o *oracle) jobSettled(w storage.Write, seq storage.ID) {
	if o.kinds[w.ID] != agent.JobKindName {
		return
	}
	o.jobEnds[w.ID] = endOf(w.Status, w.State, seq)
}

func endOf(status string, state json.RawMessage, seq storage.ID) jobEnd {
	var st agent.JobState
	end := jobEnd{status: status, seq: seq}
	if json.Unmarshal(state, &st) == nil {
		end.exitCode = st.ExitCode
		end.failed = st.Output != nil && st.Output.IsError
	}
	return end
}

// jobResynced notes job t as a restarted process's store has it: a
// settlement the oracle saw may have been lost with the old process, and
// one it did not see may have persisted.
func (o *oracle) jobResynced(t *storage.Task) {
	switch {
	case t.Kind != agent.JobKindName:
	case t.Live():
		delete(o.jobEnds, t.ID)
	default:
		o.jobEnds[t.ID] = endOf(t.Status, t.State, 0)
	}
}

// jobResult is what a shell call's settlement reports: its output, and
// the job its details name.
type jobResult struct {
	out  *agent.ToolOutputState
	text string // the output's text
	job  *struct {
		ID       storage.ID `json:"id"`
		Status   string     `json:"status"`
		ExitCode *int       `json:"exitCode"`
	}
}

// jobResultOf reads a tool call's settled state (ok false: it names no
// job).
func jobResultOf(state json.RawMessage) (r jobResult, ok bool) {
	var st struct {
		Output *agent.ToolOutputState `json:"output"`
	}
	var details struct {
		Job json.RawMessage `json:"job"`
	}
	if json.Unmarshal(state, &st) != nil || st.Output == nil || json.Unmarshal(st.Output.Details, &details) != nil || details.Job == nil ||
		json.Unmarshal(details.Job, &r.job) != nil || r.job == nil {
		return r, false
	}
	r.out = st.Output
	for _, b := range st.Output.Content {
		if b.Type == "text" {
			r.text = b.Text
			break
		}
	}
	return r, true
}

// shellCallSettled holds a tool call's settlement w at seq, made by its
// own execute, to the rule.
func (o *oracle) shellCallSettled(inv core.Invocation, byTask bool, w storage.Write, by string, seq storage.ID) error {
	tool := o.tools[w.ID]
	if !byTask || inv.Task != w.ID || inv.Method != core.MethodExecute || w.Status != "done" || o.kinds[w.ID] != agent.ToolKindName {
		return nil
	}
	if c, ok := o.jobCalls[w.ID]; ok && tool == agent.JobToolName && (c.command == "stop" || c.command == "status") {
		return o.jobLookSettled(c, w, by, seq)
	}
	if _, waits := o.waitsFor[w.ID]; tool != agent.BashToolName && !(tool == agent.JobToolName && waits) {
		return nil
	}
	r, ok := jobResultOf(w.State)
	if !ok {
		return nil
	}
	d, out := r.job, r.out
	lines := strings.Split(strings.TrimRight(r.text, "\n"), "\n")
	last := lines[len(lines)-1]
	end, seen := o.jobEnds[d.ID]
	if d.Status == agent.JobPlanned || d.Status == agent.JobRunning {
		if out.IsError {
			return o.fail(broke(ruleShellCall, "%s settled %s call %d at %d as an error (%q), though its job %d was still %s", by, tool, w.ID, seq, last, d.ID, d.Status))
		}
		return nil
	}
	if !seen {
		return nil // it ended in a commit the oracle did not see
	}
	if d.Status != end.status || !sameCode(d.ExitCode, end.exitCode) {
		return o.fail(broke(ruleShellCall, "%s settled %s call %d at %d saying job %d ended %s (exit code %s); it settled %s (exit code %s)",
			by, tool, w.ID, seq, d.ID, d.Status, codeText(d.ExitCode), end.status, codeText(end.exitCode)))
	}
	var want string
	switch {
	case end.status == agent.JobKilled:
		want = fmt.Sprintf("job %d was stopped", d.ID)
	case end.status == agent.JobLost:
		want = fmt.Sprintf("job %d was lost: the session stopped while it ran", d.ID)
	case end.failed:
		want = fmt.Sprintf("job %d failed", d.ID)
	case end.exitCode != nil && *end.exitCode != 0:
		want = fmt.Sprintf("exit code %d", *end.exitCode)
	}
	switch {
	case want == "" && out.IsError:
		return o.fail(broke(ruleShellCall, "%s settled %s call %d at %d as an error (%q), though its job %d exited with code %s", by, tool, w.ID, seq, last, d.ID, codeText(end.exitCode)))
	case want != "" && (!out.IsError || last != want):
		return o.fail(broke(ruleShellCall, "%s settled %s call %d at %d with error %t ending %q; its job %d ended %s (exit code %s, failed %t), so it is an error ending %q",
			by, tool, w.ID, seq, out.IsError, last, d.ID, end.status, codeText(end.exitCode), end.failed, want))
	}
	return nil
}

// jobLookSettled holds a job tool's stop or status c, settled by w at
// seq, to the job as it stood: one that had ended before the call started
// is reported ended as it ended (a stop says it had already ended, and
// stops nothing); one still live when the call settles is reported live
// (a stop says it is stopping it). One that ended while the call ran may
// be either.
func (o *oracle) jobLookSettled(c jobCall, w storage.Write, by string, seq storage.ID) error {
	r, ok := jobResultOf(w.State)
	if !ok || r.job.ID != c.job {
		return nil // no job of the call's conversation: the tool refused it
	}
	end, ended := o.jobEnds[c.job]
	start, started := o.callStart[w.ID]
	before := ended && started && end.seq <= start
	live := r.job.Status == agent.JobPlanned || r.job.Status == agent.JobRunning
	var problem string
	switch {
	case before && r.job.Status != end.status:
		problem = fmt.Sprintf("reports job %d %s; it had ended %s at %d, before the call started (after %d)", c.job, r.job.Status, end.status, end.seq, start)
	case before && c.command == "stop" && r.text != fmt.Sprintf("Job %d had already ended: %s.", c.job, end.status):
		problem = fmt.Sprintf("says %q of job %d, which had ended %s before the call started", r.text, c.job, end.status)
	case !ended && !live:
		problem = fmt.Sprintf("reports job %d %s; it is still live", c.job, r.job.Status)
	case !ended && c.command == "stop" && !strings.HasPrefix(r.text, fmt.Sprintf("Stopping job %d (", c.job)):
		problem = fmt.Sprintf("says %q of job %d, which is still live", r.text, c.job)
	case c.command == "status" && !strings.HasPrefix(r.text, fmt.Sprintf("Job %d (", c.job)) || c.command == "status" && !strings.Contains(r.text, " is "+r.job.Status):
		problem = fmt.Sprintf("says %q of job %d, which it reports %s", r.text, c.job, r.job.Status)
	}
	if problem != "" {
		return o.fail(broke(ruleShellCall, "%s settled job %s call %d at %d: it %s", by, c.command, w.ID, seq, problem))
	}
	return nil
}

func sameCode(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func codeText(c *int) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprint(*c)
}

// failingCommandSeeds is how often a shell program's model runs a command
// that exits with a code other than 0 (every third seed from 2).
const failingCommandSeeds = 3

// drawFailingCommands has the shell program of every failingCommandSeeds-th
// seed, from a generator of its own, run lint (which exits 1) in about half
// of its model's bash calls of go test, which exits 0: no other command of
// a drawn program exits with a code but 0.
func drawFailingCommands(p *program, seed uint64) {
	if !p.shell || seed%failingCommandSeeds != 2 {
		return
	}
	rng := seededRNG(seed, "failing commands")
	for i, l := range p.lines {
		if l.op != "respond" || len(l.args) != 2 || l.args[0] != "calls" {
			continue
		}
		calls := strings.Split(l.args[1], ",")
		for j, c := range calls {
			if c == "bash:go test ./..." && rng.IntN(2) == 0 {
				calls[j] = "bash:lint"
			}
		}
		p.lines[i] = progLine{op: "respond", args: []string{"calls", strings.Join(calls, ",")}}
	}
}
