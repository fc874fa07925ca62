package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pico-go/pico/internal/plant"
	"strings"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The shell tools' names (§8.3, §8.6).
const (
	BashToolName = "bash"
	JobToolName  = "job"
)

// JobOutput is what a job printed and how far it got: the output it
// retains (live from its scratch while it runs, from its state after) and
// the exit code of its last run, once there is one.
type JobOutput struct {
	Job      storage.ID      `json:"job"`
	Cmd      string          `json:"cmd"`
	Status   string          `json:"status"`
	Output   ToolOutputState `json:"output"`
	ExitCode *int            `json:"exitCode,omitempty"`
}

// NotAJobError is an id that names no job (of the conversation asking).
type NotAJobError struct {
	ID     storage.ID
	Reason string
}

func (e *NotAJobError) Error() string {
	return fmt.Sprintf("agent: %d is not a job: %s", e.ID, e.Reason)
}

// readJobOutput reads job id's output on the line, so that the status and
// the output agree: a running job's scratch is read before it can settle
// and retire it. conv, when not 0, is the conversation the job must be of.
func readJobOutput(tx *core.Tx, id, conv storage.ID) (JobOutput, error) {
	t, ok, err := tx.GetTask(id)
	switch {
	case err != nil:
		return JobOutput{}, err
	case !ok:
		return JobOutput{}, &NotAJobError{ID: id, Reason: "there is no such task"}
	case t.Kind != JobKindName:
		return JobOutput{}, &NotAJobError{ID: id, Reason: "it is a " + t.Kind + " task"}
	case conv != 0 && t.ConversationID != conv && !plant.On("job-tool-any-conversation"):
		return JobOutput{}, &NotAJobError{ID: id, Reason: fmt.Sprintf("it belongs to conversation %d", t.ConversationID)}
	}
	st, err := decodeState[JobState](t)
	if err != nil {
		return JobOutput{}, err
	}
	out := JobOutput{Job: id, Cmd: st.Cmd, Status: t.Status, ExitCode: st.ExitCode}
	switch {
	case t.Status == JobRunning:
		ops, err := readScratchFrom[SinkOp](otherScratch{tx}, sinkOpsList.In(id).Address)
		if err != nil {
			return JobOutput{}, err
		}
		f := newOutputFold(st.limits())
		if plant.On("job-output-drops-last-chunk") && len(ops) > 0 {
			ops = ops[:len(ops)-1]
		}
		for _, op := range ops {
			f.apply(op)
		}
		out.Output, out.ExitCode = f.result(nil, nil), nil
	case st.Output != nil:
		out.Output = *st.Output
	default:
		out.Output = newOutputFold(st.limits()).result(nil, nil)
	}
	return out, nil
}

// otherScratch reads another task's committed scratch inside a main
// transaction.
type otherScratch struct{ tx *core.Tx }

func (o otherScratch) GetValue(addr storage.Address) (storage.Version, bool, error) {
	return o.tx.GetValue(addr, 0)
}

func (o otherScratch) ReadList(addr storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	return o.tx.ReadList(addr, q)
}

// JobOutput reads a job's output and status (§9.3) in one coherent read.
func (r *ToolRuntime) JobOutput(ctx context.Context, id storage.ID) (JobOutput, error) {
	var out JobOutput
	_, err := r.Commit(ctx, func(tx *core.ConversationTx) error {
		var err error
		out, err = readJobOutput(tx.Tx, id, 0)
		return err
	})
	return out, err
}

// JobOutput reads a job's output and status, for a UI.
func (h *Harness) JobOutput(ctx context.Context, id storage.ID) (JobOutput, error) {
	var out JobOutput
	_, err := h.Commit(ctx, func(tx *core.Tx) error {
		var err error
		out, err = readJobOutput(tx, id, 0)
		return err
	})
	return out, err
}

// BashTool runs a shell command as a job (§8.3): the call creates the job
// first, recording its id and cancellation policy on its own task in the
// same commit, then waits for it with the blocking budget. A job that
// outlives the budget goes on without the call, which settles with the
// output so far, delegates to the job and says so; the job's end is then
// announced by a notice. Aborting the call before that kills the job. It
// is safe to replay: a replay finds the job the first run recorded.
func BashTool() Tool {
	return Tool{
		Definition: ai.Tool{Name: BashToolName,
			Description: "Run a shell command. A command that takes longer than the call's time budget keeps running as a job; its end is announced, and the job tool reads, waits for or stops it.",
			Parameters: json.RawMessage(`{"type":"object","required":["command"],"properties":{` +
				`"command":{"type":"string","minLength":1,"description":"the command line"},` +
				`"cwd":{"type":"string","description":"the directory to run it in"}},"additionalProperties":false}`)},
		Output:  OutputLimits{Retain: "tail"},
		Replay:  ReplaySafe,
		Execute: runBash,
	}
}

func runBash(ctx context.Context, callID string, raw json.RawMessage, out *ToolOutput, rt *ToolRuntime) error {
	var args struct {
		Command string `json:"command"`
		Cwd     string `json:"cwd"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return err
	}
	if rt.Env() == nil {
		return errors.New("no execution environment is configured")
	}
	job, err := startToolJob(ctx, rt, callID, JobSpec{Cmd: args.Command, Cwd: args.Cwd, Limits: OutputLimits{Retain: "tail"},
		Origin: &JobOrigin{Tool: BashToolName, Task: rt.TaskID(), CallID: callID}})
	if err != nil {
		return err
	}
	return awaitJob(ctx, rt, job, out, true)
}

// startToolJob creates the call's job once, with the reference on the
// call's task in the same commit; a replay finds the recorded one.
func startToolJob(ctx context.Context, rt *ToolRuntime, callID string, spec JobSpec) (storage.ID, error) {
	task, _, err := rt.GetTask(ctx, rt.TaskID())
	if err != nil {
		return 0, err
	}
	st, err := decodeState[ToolState](task)
	if err != nil {
		return 0, err
	}
	if st.Job != nil {
		return st.Job.ID, nil
	}
	var job storage.ID
	_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error {
		var err error
		if job, err = CreateJob(tx.Tx, tx.ID, spec); err != nil {
			return err
		}
		tx.Patch(rt.TaskID(), core.TaskPatch{State: map[string]any{"job": ToolJob{ID: job, CancelOnAbort: true}}})
		return nil
	})
	return job, err
}

// awaitJob waits for job within the call's budget and writes its output.
// A job still running when the budget runs out goes on without the call;
// the call that started it (delegate) delegates it, so that its end
// arrives as a notice. A job tool's wait does not: the job was delegated
// once already, and its notice is asked for.
func awaitJob(ctx context.Context, rt *ToolRuntime, job storage.ID, out *ToolOutput, delegate bool) error {
	done, err := rt.WaitForTask(ctx, job, rt.Budget)
	if err != nil {
		return err
	}
	o, err := rt.JobOutput(ctx, job)
	if err != nil {
		return err
	}
	writeJobOutput(out, o)
	if !done {
		if delegate {
			out.Delegate(job)
		}
		out.Diag("info", fmt.Sprintf("still running as job %d after %s; use the job tool's wait, status, output or stop with id %d", job, rt.Budget, job), "budget")
		return nil
	}
	return jobFailure(o)
}

// writeJobOutput puts a job's output in the call's: its text, and its
// totals (captured, since the job measured them).
func writeJobOutput(out *ToolOutput, o JobOutput) {
	out.Details["job"] = jobDetails{ID: o.Job, Status: o.Status, ExitCode: o.ExitCode}
	out.Replace(o.Output.text())
	out.Capture(o.Output.Truncation)
}

// jobDetails are the details of a shell tool call's result.
type jobDetails struct {
	ID       storage.ID `json:"id"`
	Status   string     `json:"status"`
	ExitCode *int       `json:"exitCode,omitempty"`
}

// jobFailure is the error of a job that ended badly, nil for exit code 0.
func jobFailure(o JobOutput) error {
	switch {
	case o.Status == JobKilled || plant.On("job-exited-reported-stopped") && o.Status == JobExited:
		return fmt.Errorf("job %d was stopped", o.Job)
	case o.Status == JobLost:
		return fmt.Errorf("job %d was lost: the session stopped while it ran", o.Job)
	case o.Output.IsError:
		return fmt.Errorf("job %d failed", o.Job)
	case o.ExitCode != nil && *o.ExitCode != 0 && !plant.On("job-exit-code-ignored"):
		return fmt.Errorf("exit code %d", *o.ExitCode)
	}
	return nil
}

// JobTool is the built-in job tool (§8.6): status, output, wait and stop
// of a job of this conversation, by the id bash or a UI gave it.
func JobTool() Tool {
	return Tool{
		Definition: ai.Tool{Name: JobToolName,
			Description: "Look after a job (a command running in the background): its status, its output so far, wait for it to end, or stop it.",
			Parameters: json.RawMessage(`{"type":"object","required":["command","id"],"properties":{` +
				`"command":{"enum":["status","output","wait","stop"]},` +
				`"id":{"type":"integer","minimum":1,"description":"the job, as bash or a notice named it"}},"additionalProperties":false}`)},
		Output:  OutputLimits{Retain: "tail"},
		Replay:  ReplaySafe,
		Execute: runJobTool,
	}
}

func runJobTool(ctx context.Context, _ string, raw json.RawMessage, out *ToolOutput, rt *ToolRuntime) error {
	var args struct {
		Command string     `json:"command"`
		ID      storage.ID `json:"id"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return err
	}
	var o JobOutput
	var st JobState
	read := func() error {
		_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
			var err error
			if o, err = readJobOutput(tx.Tx, args.ID, tx.ID); err != nil {
				return err
			}
			t, _, err := tx.GetTask(args.ID)
			if err == nil {
				st, err = decodeState[JobState](t)
			}
			return err
		})
		return err
	}
	if err := read(); err != nil {
		return err
	}
	switch args.Command {
	case "status":
		out.Details["job"] = jobDetails{ID: o.Job, Status: o.Status, ExitCode: o.ExitCode}
		out.Write(jobStatusLine(o, st))
		return nil
	case "output":
		writeJobOutput(out, o)
		return nil
	case "wait":
		return awaitJob(ctx, rt, args.ID, out, false)
	case "stop":
		if isTerminalJob(o.Status) {
			out.Details["job"] = jobDetails{ID: o.Job, Status: o.Status, ExitCode: o.ExitCode}
			out.Write(fmt.Sprintf("Job %d had already ended: %s.", o.Job, o.Status))
			return nil
		}
		err := rt.AbortTask(ctx, args.ID)
		if core.RuleOf(err) == core.RuleTaskTerminal {
			err = nil // it ended on its own meanwhile: stopped either way
		}
		if err != nil {
			return err
		}
		out.Details["job"] = jobDetails{ID: o.Job, Status: o.Status}
		out.Write(fmt.Sprintf("Stopping job %d (%s).", o.Job, o.Cmd))
		return nil
	}
	return fmt.Errorf("unknown command %q", args.Command)
}

func isTerminalJob(status string) bool {
	if plant.On("job-stop-ended-stops-again") {
		return status == JobExited
	}
	return status == JobExited || status == JobKilled || status == JobLost
}

// jobStatusLine describes a job in one line.
func jobStatusLine(o JobOutput, st JobState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job %d (%s) is %s", o.Job, o.Cmd, o.Status)
	if o.ExitCode != nil {
		fmt.Fprintf(&b, ", last exit code %d", *o.ExitCode)
	}
	if st.Every > 0 {
		fmt.Fprintf(&b, "; it runs every %s", time.Duration(st.Every)*time.Millisecond)
		if o.Status == JobPlanned && st.NotBefore > 0 {
			fmt.Fprintf(&b, ", next at %s", time.UnixMilli(st.NotBefore).UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(&b, ", %d runs so far", st.Runs)
	}
	t := o.Output.Truncation
	fmt.Fprintf(&b, "; %d bytes of output.", t.TotalBytes)
	return b.String()
}
