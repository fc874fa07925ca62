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

// jobEnd is how a job's last run ended, from its settlement.
type jobEnd struct {
	status   string
	exitCode *int
	failed   bool // its output says the run failed
}

// jobSettled notes how job w.ID ended.
func (o *oracle) jobSettled(w storage.Write) {
	if o.kinds[w.ID] != agent.JobKindName {
		return
	}
	var st agent.JobState
	end := jobEnd{status: w.Status}
	if json.Unmarshal(w.State, &st) == nil {
		end.exitCode = st.ExitCode
		end.failed = st.Output != nil && st.Output.IsError
	}
	o.jobEnds[w.ID] = end
}

// shellCallSettled holds a tool call's settlement w at seq, made by its
// own execute, to the rule.
func (o *oracle) shellCallSettled(inv core.Invocation, byTask bool, w storage.Write, by string, seq storage.ID) error {
	tool := o.tools[w.ID]
	if !byTask || inv.Task != w.ID || inv.Method != core.MethodExecute || w.Status != "done" || o.kinds[w.ID] != agent.ToolKindName {
		return nil
	}
	if _, waits := o.waitsFor[w.ID]; tool != agent.BashToolName && !(tool == agent.JobToolName && waits) {
		return nil
	}
	var st struct {
		Output *agent.ToolOutputState `json:"output"`
	}
	var details struct {
		Job *struct {
			ID       storage.ID `json:"id"`
			Status   string     `json:"status"`
			ExitCode *int       `json:"exitCode"`
		} `json:"job"`
	}
	if json.Unmarshal(w.State, &st) != nil || st.Output == nil || json.Unmarshal(st.Output.Details, &details) != nil || details.Job == nil {
		return nil
	}
	d, out := details.Job, st.Output
	text := out.Content
	var last string
	for _, b := range text {
		if b.Type == "text" {
			lines := strings.Split(strings.TrimRight(b.Text, "\n"), "\n")
			last = lines[len(lines)-1]
			break
		}
	}
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
