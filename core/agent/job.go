package agent

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// JobKindName is the built-in job kind's name (§8.6).
const JobKindName = "job"

// The job statuses: planned (waiting to run, or between the runs of a
// schedule), running, and the three ends.
const (
	JobPlanned = "planned"
	JobRunning = "running"
	JobExited  = "exited"
	JobKilled  = "killed"
	JobLost    = "lost"
)

// JobKind is the built-in job kind: a background task that runs one
// command through the execution environment, once or on a schedule.
// planned is its start role, running inflight, exited, killed and lost
// terminal. Its output goes through the progress bridge into its scratch,
// so a watcher sees it live and its preview is a tool's; the terminal state
// keeps the bounded output and the exit code.
var JobKind core.TaskKind = jobKind{core.Statuses{Name: JobKindName, Initial: JobPlanned, Roles: map[string]storage.TaskRole{
	JobPlanned: storage.RoleStart, JobRunning: storage.RoleInflight,
	JobExited: storage.RoleTerminal, JobKilled: storage.RoleTerminal, JobLost: storage.RoleTerminal,
}}}

type jobKind struct{ core.Statuses }

// JobOrigin is the call that started a job, so that a UI renders the job
// with that tool's component.
type JobOrigin struct {
	Tool   string     `json:"tool"`
	Task   storage.ID `json:"task"`
	CallID string     `json:"callId"`
}

// Catch-up policies of a schedule: what a job does when it wakes after a
// whole interval of its schedule went by (the session was down).
const (
	// CatchUpOnce runs one run now for all the runs it missed (never the
	// backlog), then keeps to the schedule. It is the default.
	CatchUpOnce = "once"
	// CatchUpSkip skips the missed runs and waits for the next one.
	CatchUpSkip = "skip"
)

// JobState is a job task's state (§8.6). Times are Unix milliseconds of
// the runtime's clock.
type JobState struct {
	Cmd    string       `json:"cmd"`
	Cwd    string       `json:"cwd,omitempty"`
	Limits OutputLimits `json:"limits,omitempty"`
	Origin *JobOrigin   `json:"origin,omitempty"`
	// Every, when positive, makes the job a schedule: after each run it
	// goes back to planned, due at the next multiple of Every after
	// NotBefore that is still ahead, so a restart never runs a backlog.
	Every     int64  `json:"every,omitempty"`
	NotBefore int64  `json:"notBefore,omitempty"`
	CatchUp   string `json:"catchUp,omitempty"`
	// Rerun "safe" lets recovery run a job found running again; otherwise
	// it settles lost, since no process can be adopted after a crash.
	Rerun     string `json:"rerun,omitempty"`
	StartedAt int64  `json:"startedAt,omitempty"`
	// Runs counts the runs a schedule finished.
	Runs int `json:"runs,omitempty"`
	// Output and ExitCode are the last run's: set when a run ends.
	Output   *ToolOutputState `json:"output,omitempty"`
	ExitCode *int             `json:"exitCode,omitempty"`
}

// limits are the output limits of a job: a job keeps the end of its
// output unless told otherwise.
func (s JobState) limits() OutputLimits {
	l := s.Limits
	if l.Retain == "" {
		l.Retain = "tail"
	}
	return l.withDefaults()
}

// JobSpec describes a job to start.
type JobSpec struct {
	Cmd    string
	Cwd    string
	Limits OutputLimits
	Origin *JobOrigin
	// Every makes a schedule; NotBefore delays the first run.
	Every     time.Duration
	NotBefore time.Time
	CatchUp   string
	// RerunSafe lets recovery run an interrupted run again.
	RerunSafe bool
}

// JobSpecError is a job spec that cannot be started, naming what is wrong.
type JobSpecError struct {
	Cmd    string
	Reason string
}

func (e *JobSpecError) Error() string {
	return fmt.Sprintf("agent: job %q: %s", e.Cmd, e.Reason)
}

func (s JobSpec) state() (JobState, error) {
	bad := func(format string, args ...any) (JobState, error) {
		return JobState{}, &JobSpecError{Cmd: s.Cmd, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case strings.TrimSpace(s.Cmd) == "":
		return bad("empty command")
	case s.Every < 0:
		return bad("negative interval %s", s.Every)
	case s.Every > 0 && s.Every < time.Millisecond:
		return bad("interval %s is under a millisecond", s.Every)
	case s.CatchUp != "" && s.CatchUp != CatchUpOnce && s.CatchUp != CatchUpSkip:
		return bad("catch-up policy %q: want %q or %q", s.CatchUp, CatchUpOnce, CatchUpSkip)
	case s.CatchUp != "" && s.Every == 0:
		return bad("a catch-up policy without an interval")
	case s.Limits.Retain != "" && s.Limits.Retain != "head" && s.Limits.Retain != "tail":
		return bad("output retain %q: want \"head\" or \"tail\"", s.Limits.Retain)
	case s.Limits.MaxBytes < 0 || s.Limits.MaxLines < 0:
		return bad("negative output limits")
	}
	st := JobState{Cmd: s.Cmd, Cwd: s.Cwd, Limits: s.Limits, Origin: s.Origin, Every: s.Every.Milliseconds(), CatchUp: s.CatchUp}
	if !s.NotBefore.IsZero() {
		st.NotBefore = s.NotBefore.UnixMilli()
	}
	if s.RerunSafe && !plant.On("job-rerun-unrecorded") {
		st.Rerun = "safe"
	}
	return st, nil
}

// CreateJob creates a background job in conversation conv in tx and
// returns its id. Nothing runs until the session is driven.
func CreateJob(tx *core.Tx, conv storage.ID, spec JobSpec) (storage.ID, error) {
	st, err := spec.state()
	if err != nil {
		return 0, err
	}
	id := tx.Task(JobKind, core.TaskSpec{ConversationID: conv, Background: true, State: st})
	return id, tx.Err()
}

// StartJob starts a background job in this conversation in one commit
// (§8.6): a UI's way to run a command or a schedule.
func (c *Conversation) StartJob(ctx context.Context, spec JobSpec) (storage.ID, error) {
	var id storage.ID
	_, err := c.Commit(ctx, func(tx *core.ConversationTx) error {
		var err error
		id, err = CreateJob(tx.Tx, tx.ID, spec)
		return err
	})
	return id, err
}

// Notification requests (§8.3): a tool whose call returned before its job
// ended asks, in its settlement, for a notice when the job ends. The
// request is sticky state of the job's conversation keyed by job id, not a
// patch of the job, which its former owner must not write; whichever
// terminal commit of the job comes first consumes it and appends the
// notice, atomically, on every path: exited, lost and killed.
var jobNotifyValue = storage.ConversationValue[JobNotify]("pi.job.notify", storage.Sticky)

// JobNotify is a pending notification request.
type JobNotify struct {
	Tool   storage.ID `json:"tool"`
	CallID string     `json:"callId,omitempty"`
}

func jobNotifyAddr(conv, job storage.ID) storage.Value[JobNotify] {
	return jobNotifyValue.In(conv).WithKey(strconv.FormatInt(int64(job), 10))
}

// JobNoticeData is the data of the notice a delegated job appends when it
// ends; the notice's model is one system message saying the same.
type JobNoticeData struct {
	Job      storage.ID `json:"job"`
	Cmd      string     `json:"cmd"`
	Status   string     `json:"status"`
	ExitCode *int       `json:"exitCode,omitempty"`
	Origin   *JobOrigin `json:"origin,omitempty"`
}

// noticeOutputMax bounds the output a notice repeats: the end of it.
const noticeOutputMax = 2_000

// appendJobNotice appends the notice of job's end to conv.
func appendJobNotice(tx *core.Tx, conv, job storage.ID, st JobState, status string, out *ToolOutputState, now time.Time) {
	var b strings.Builder
	fmt.Fprintf(&b, "Job %d (%s) ", job, st.Cmd)
	switch {
	case status == JobLost && st.Every > 0:
		b.WriteString("lost a run: the session stopped while it ran; it runs again on its schedule.")
	case status == JobLost:
		b.WriteString("was lost: the session stopped while it ran, and it is not safe to run again.")
	case status == JobKilled || plant.On("job-notice-stopped-when-exited") && status == JobExited:
		b.WriteString("was stopped.")
	case st.Every > 0 && st.ExitCode != nil:
		fmt.Fprintf(&b, "finished a run with exit code %d; it runs again on its schedule.", *st.ExitCode)
	case st.Every > 0:
		b.WriteString("finished a run without an exit code; it runs again on its schedule.")
	case st.ExitCode != nil:
		fmt.Fprintf(&b, "exited with code %d.", *st.ExitCode)
	default:
		b.WriteString("ended without an exit code.")
	}
	if out != nil && !plant.On("job-notice-drops-output") {
		if text := out.text(); text != "" {
			if len(text) > noticeOutputMax {
				cut := len(text) - noticeOutputMax
				for cut < len(text) && !utf8.RuneStart(text[cut]) {
					cut++ // never split a character
				}
				text = "…" + text[cut:]
			}
			fmt.Fprintf(&b, "\nOutput (use the job tool's output command with id %d for all of it):\n%s", job, text)
		}
	}
	msg := ai.Message{Role: ai.RoleSystem, Content: ai.PlainText(b.String()), Timestamp: now.UnixMilli()}
	core.AppendNotice(tx, conv, JobNoticeData{Job: job, Cmd: st.Cmd, Status: status, ExitCode: st.ExitCode, Origin: st.Origin}, &msg)
}

// consumeNotify consumes a pending notification request for job and, if
// there was one, appends the notice of how it ended. Every terminal commit
// of a job calls it, so the notice is published exactly once whichever of
// delegation and the end commits first.
func consumeNotify(tx *core.Tx, conv, job storage.ID, st JobState, status string, out *ToolOutputState, now time.Time) error {
	v := core.TxValue(tx, jobNotifyAddr(conv, job))
	_, requested, err := v.Get(0)
	if err != nil || !requested {
		return err
	}
	v.Delete()
	appendJobNotice(tx, conv, job, st, status, out, now)
	return nil
}

// delegateJob is what a tool call's settlement does for the job it
// delegated to (§8.3), in that commit: a job still live gets a
// notification request; a job already ended gets its notice now. It
// reports whether the task named is a job of the call's conversation.
func delegateJob(tx *core.Tx, conv, job, tool storage.ID, callID string, now time.Time) (bool, error) {
	t, ok, err := tx.GetTask(job)
	if err != nil || !ok || t.Kind != JobKindName || t.ConversationID != conv {
		return false, err
	}
	if t.Live() {
		core.TxValue(tx, jobNotifyAddr(conv, job)).Set(JobNotify{Tool: tool, CallID: callID})
		if plant.On("job-notices-twice") {
			st, _ := decodeState[JobState](t)
			appendJobNotice(tx, conv, job, st, t.Status, nil, now)
		}
		return true, nil
	}
	st, err := decodeState[JobState](t)
	if err != nil {
		return true, err
	}
	appendJobNotice(tx, conv, job, st, t.Status, st.Output, now)
	return true, nil
}

// --- the kind's methods ---

// Execute waits until the job is due, marks it running and runs it.
func (k jobKind) Execute(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, err := decodeState[JobState](task)
	if err != nil {
		return err
	}
	if st.NotBefore > 0 && !(plant.On("job-first-run-undelayed") && st.Runs == 0) {
		if st.CatchUp == CatchUpSkip && st.Every > 0 {
			if now := rt.Now().UnixMilli(); now >= st.NotBefore+st.Every {
				st.NotBefore = nextSlot(st.NotBefore, st.Every, now)
				if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
					tx.Patch(task.ID, core.TaskPatch{State: map[string]any{"notBefore": st.NotBefore}})
					return nil
				}); err != nil {
					return err
				}
			}
		}
		if err := rt.Sleep(ctx, time.UnixMilli(st.NotBefore)); err != nil {
			return err
		}
	}
	st.StartedAt = rt.Now().UnixMilli()
	state := map[string]any{"startedAt": st.StartedAt}
	if st.Every > 0 && st.NotBefore == 0 {
		// A schedule without a first time keeps to the grid of its first run.
		st.NotBefore = st.StartedAt
		state["notBefore"] = st.NotBefore
	}
	if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		tx.Patch(task.ID, core.TaskPatch{Status: JobRunning, State: state})
		return nil
	}); err != nil {
		return err
	}
	return k.run(ctx, task, rt, st)
}

// nextSlot is the first time after now on the grid from slot by every.
func nextSlot(slot, every, now int64) int64 {
	if slot > now {
		return slot
	}
	return slot + ((now-slot)/every+1)*every
}

// run runs the command and commits how it ended: the notice of a pending
// notification request, then either the next run of a schedule or the
// exited settlement. A mark that lands meanwhile makes the commit reject;
// the fresh abort invocation settles killed.
func (k jobKind) run(ctx context.Context, task *storage.Task, rt *core.TaskRuntime, st JobState) error {
	cfg, err := configOf(rt.Harness())
	if err != nil {
		return err
	}
	progress, err := rt.Progress(ctx)
	if err != nil {
		return err
	}
	tr, err := rt.Preview(ctx)
	if err != nil {
		return err
	}
	sink := newJobSink(st.limits(), progress, tr, rt.PreviewWatched, rt.Now)
	// A run starts from a clean output: what a previous run of a schedule,
	// or an interrupted run, wrote is not this run's.
	if (st.Runs > 0 || rt.Method() == core.MethodRecover) && !sink.clear() {
		if err := progress.Drain(); err != nil {
			return err
		}
		return ctx.Err()
	}
	var res ExecResult
	var execErr error
	if cfg.env == nil {
		execErr = errors.New("no execution environment is configured")
	} else {
		res, execErr = cfg.env.Exec(ctx, st.Cmd, ExecOptions{Cwd: st.Cwd, OnUpdate: sink.chunk, SpillAfter: st.limits().MaxBytes})
	}
	sink.end(res.SpillPath)
	if err := progress.Drain(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var spillErr *SpillError
	if errors.As(execErr, &spillErr) {
		// The process ran to its end; only the spill file is missing.
		execErr = nil
	}
	out := sink.result(execErr)
	if spillErr != nil {
		out.Diags = append(out.Diags, Diag{Severity: "warn", Code: "spill", Message: "the whole output could not be kept: " + spillErr.Err.Error()})
	}
	if execErr == nil {
		code := res.ExitCode
		st.ExitCode = &code
	} else {
		st.ExitCode = nil
	}
	_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error {
		now := rt.Now()
		if err := consumeNotify(tx.Tx, tx.ID, task.ID, st, JobExited, &out, now); err != nil {
			return err
		}
		endRun(tx, task.ID, st, JobExited, map[string]any{"output": out, "exitCode": st.ExitCode}, now)
		return nil
	})
	return err
}

// endRun ends a run in tx with state: a schedule goes back to planned,
// due at its next slot, unless it was killed; any other job settles
// status.
func endRun(tx *core.ConversationTx, job storage.ID, st JobState, status string, state map[string]any, now time.Time) {
	if st.Every > 0 && status != JobKilled && !(plant.On("schedule-lost-run-settles") && status == JobLost) {
		state["notBefore"] = nextSlot(st.NotBefore, st.Every, now.UnixMilli())
		if plant.On("schedule-next-from-end") {
			state["notBefore"] = now.UnixMilli() + st.Every
		}
		state["runs"] = st.Runs + 1
		tx.Patch(job, core.TaskPatch{Status: JobPlanned, State: state})
		return
	}
	tx.Settle(job, status, state)
}

// Recover runs a job found running again if it declared that safe;
// otherwise the interrupted run is lost: a one-off job settles lost with
// the output its scratch holds, and a schedule goes back to planned for
// its next run with that output, since running an unsafe command again
// now is what the policy forbids, not running it on schedule. Either way
// the lost run's notice is published if one was requested.
func (k jobKind) Recover(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, err := decodeState[JobState](task)
	if err != nil {
		return err
	}
	if st.Rerun == "safe" {
		st.StartedAt = rt.Now().UnixMilli()
		if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
			tx.Patch(task.ID, core.TaskPatch{State: map[string]any{"startedAt": st.StartedAt}})
			return nil
		}); err != nil {
			return err
		}
		return k.run(ctx, task, rt, st)
	}
	if plant.On("job-recover-kills") {
		return k.end(ctx, task, rt, st, JobKilled)
	}
	return k.end(ctx, task, rt, st, JobLost)
}

// Abort settles killed, once the run and its output callbacks returned,
// with the output committed before the mark, and the notice if requested.
func (k jobKind) Abort(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, err := decodeState[JobState](task)
	if err != nil {
		return err
	}
	return k.end(ctx, task, rt, st, JobKilled)
}

// end ends a run that did not finish: lost or killed. A job that was
// running keeps what its scratch holds; a planned one the output of its
// last run. Only a lost run of a schedule leaves the task live, planned
// for the next run on its grid.
func (k jobKind) end(ctx context.Context, task *storage.Task, rt *core.TaskRuntime, st JobState, status string) error {
	out := st.Output
	if task.Status == JobRunning {
		f, err := durableOutput(ctx, rt, st.limits())
		if err != nil {
			return err
		}
		o := f.result(nil, nil)
		out = &o
		if !plant.On("job-cut-run-keeps-code") {
			st.ExitCode = nil
		}
	}
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		noticed := status
		if plant.On("job-notice-says-exited") {
			noticed = JobExited
		}
		if err := consumeNotify(tx.Tx, tx.ID, task.ID, st, noticed, out, rt.Now()); err != nil {
			return err
		}
		state := map[string]any{"output": out}
		if task.Status == JobRunning && !plant.On("job-cut-run-keeps-code") {
			state["exitCode"] = nil
		}
		endRun(tx, task.ID, st, status, state, rt.Now())
		return nil
	})
	return err
}

// InitPreview builds a job's preview from its scratch: the same output
// state a tool's preview is.
func (k jobKind) InitPreview(ctx context.Context, task *storage.Task, sc core.ScratchReader) (any, error) {
	ops, err := readScratchFrom[SinkOp](sc, sinkOpsList.Address)
	if err != nil || len(ops) == 0 {
		return noOutputPreview(err)
	}
	st, err := decodeState[JobState](task)
	if err != nil {
		return nil, err
	}
	return toolPreview(st.limits(), ops)
}

// --- output ---

// jobFlushInterval is how often a job whose output overflowed its window
// writes the window to scratch. While the output fits, every chunk is
// written as it comes; after that the durable output is the window and the
// totals, rewritten at most this often (and once at the end), so the bytes
// a long or chatty job puts in the store are bounded by its limits and its
// duration, never by how much it prints.
const jobFlushInterval = 250 * time.Millisecond

// jobSink is a job's side of the progress bridge. raw folds everything
// the process printed; view folds exactly the operations written to
// scratch, so the live preview and the output are what a reader of the
// scratch rebuilds after a reopen.
type jobSink struct {
	raw, view  *outputFold
	progress   *core.Progress
	preview    *ToolOutput // view's preview; progress nil: it writes nothing itself
	now        func() time.Time
	last       time.Time // of the last flush
	written    int       // bytes of raw's text written while it fit
	pending    bool      // printed since the last flush
	overflowed bool      // the output outgrew its window
	spill      string    // where the environment kept all of it
	live       bool      // scratch still takes writes
}

func newJobSink(limits OutputLimits, progress *core.Progress, tr *delta.Tracker, watched func() bool, now func() time.Time) *jobSink {
	view := newOutputFold(limits)
	return &jobSink{raw: newOutputFold(limits), view: view, progress: progress,
		preview: &ToolOutput{fold: view, preview: tr, watched: watched}, now: now, last: now(), live: true}
}

// fits reports whether everything printed so far is in the window.
func (s *jobSink) fits() bool { return s.raw.trunc.TotalBytes == s.raw.text.Len() }

// chunk takes one piece of process output.
func (s *jobSink) chunk(c OutputChunk) {
	s.raw.write(c.Data)
	s.pending = true
	if !s.overflowed && s.fits() || s.now().Sub(s.last) >= jobFlushInterval {
		s.flush()
	}
}

// end writes what the last flush left behind, and the spill file the
// environment kept the whole output in, if it did.
func (s *jobSink) end(spill string) {
	if spill != "" {
		s.spill, s.overflowed, s.pending = spill, true, true
	}
	s.flush()
}

// flush writes the output since the last flush: as it came while the
// output fits, as the window and its totals after.
func (s *jobSink) flush() {
	if !s.pending {
		return
	}
	var ops []SinkOp
	if !s.overflowed && s.fits() {
		ops = []SinkOp{{Op: "write", Text: s.raw.text.String()[s.written:]}}
	} else {
		s.overflowed = true
		t := s.raw.result(nil, nil).Truncation
		t.SpillPath = s.spill
		ops = []SinkOp{{Op: "replace", Text: s.raw.text.String()}, {Op: "capture", Truncation: &t}}
	}
	s.written, s.pending, s.last = s.raw.text.Len(), false, s.now()
	for _, op := range ops {
		s.view.apply(op)
	}
	s.preview.trackPreview()
	if !s.live {
		return
	}
	s.live = s.progress.Write(func(sc core.ScratchTx) error {
		for _, op := range ops {
			sc.Append(sinkOpsList.Address, op)
		}
		return nil
	})
}

// clear starts the durable output over, and the preview with it; it
// reports whether scratch took it.
func (s *jobSink) clear() bool {
	s.preview.trackPreview() // the view is empty: what a reader of the cleared scratch builds
	return s.progress.Write(func(sc core.ScratchTx) error {
		sc.Clear(sinkOpsList.Address)
		return nil
	})
}

// result is the run's output state: what the scratch holds, and the
// failure of a process that could not run or died without a status.
func (s *jobSink) result(failure error) ToolOutputState {
	return s.view.result(nil, failure)
}
