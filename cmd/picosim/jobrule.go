package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// ruleJobEnd: a job ends as the method that ends it says (§8.6): its abort
// settles it killed, a recover (of a run it may not repeat) lost, and only
// an execute or a recover that ran it again settles it exited; the notice
// of its end that the same commit appends names the status it ends with.
const ruleJobEnd oracleRule = "a-job-ends-as-its-method"

// jobEnded holds w, a settlement of a job at seq in batch b, to the rule.
func (o *oracle) jobEnded(inv core.Invocation, byTask bool, w storage.Write, b storage.CommitBatch, by string, seq storage.ID) error {
	if o.kinds[w.ID] != agent.JobKindName {
		return nil
	}
	if byTask && inv.Task == w.ID {
		var want string
		switch {
		case inv.Method == core.MethodAbort:
			want = agent.JobKilled
		case w.Status == agent.JobKilled:
			want = "ended by its abort"
		case w.Status == agent.JobLost && inv.Method != core.MethodRecover:
			want = "lost only by a recover"
		}
		if want != "" && want != w.Status {
			return o.fail(broke(ruleJobEnd, "%s settled job %d %s at %d; want %s", by, w.ID, w.Status, seq, want))
		}
	}
	for _, x := range b.Writes {
		var d agent.JobNoticeData
		if x.Type != storage.WriteEntry || x.Entry == nil || x.Entry.Kind != core.NoticeKind.Kind() || json.Unmarshal(x.Entry.Data, &d) != nil || d.Job != w.ID {
			continue
		}
		if d.Status != w.Status {
			return o.fail(broke(ruleJobEnd, "%s settled job %d %s at %d with a notice %d in its commit saying %s", by, w.ID, w.Status, seq, x.Entry.ID, d.Status))
		}
		if why := noticeSays(x.Entry, d, settledOutput(w.State)); why != "" {
			return o.fail(broke(ruleJobEnd, "%s settled job %d %s at %d with a notice %d whose message %s", by, w.ID, w.Status, seq, x.Entry.ID, why))
		}
	}
	return nil
}

// noticeOutputMax is how much of a job's output its notice repeats, at
// most: its end, cut at a character.
const noticeOutputMax = 2_000

// settledOutput is the text of the output a job's settlement records (the
// first text block of its state's output), "" for none.
func settledOutput(state json.RawMessage) string {
	var st struct {
		Output *struct {
			Content []struct{ Type, Text string }
		}
	}
	if json.Unmarshal(state, &st) != nil || st.Output == nil {
		return ""
	}
	for _, b := range st.Output.Content {
		if b.Type == "text" {
			return b.Text
		}
	}
	return ""
}

// noticeSays is what is wrong with the message a job's notice gives the
// model, against the notice's data and out, the output its settlement
// records: one system message, naming the job and its command, and saying
// how it ended as the data does (stopped only when killed, lost only when
// lost, its exit code when it has one), then the end of out (at most
// noticeOutputMax bytes, cut at a character and marked "…") when there is
// any; "" when nothing is.
func noticeSays(e *storage.Entry, d agent.JobNoticeData, out string) string {
	if len(e.Model) != 1 || e.Model[0].Role != ai.RoleSystem {
		return fmt.Sprintf("is %d messages (%v), not one system message", len(e.Model), e.Model)
	}
	text := e.Model[0].Content.TextOf()
	head, _, _ := strings.Cut(text, "\n")
	says := func(s string) bool { return strings.Contains(head, s) }
	switch {
	case !strings.HasPrefix(head, fmt.Sprintf("Job %d (%s) ", d.Job, d.Cmd)):
		return fmt.Sprintf("%q does not begin by naming job %d (%s)", head, d.Job, d.Cmd)
	case says("was stopped.") != (d.Status == agent.JobKilled):
		return fmt.Sprintf("%q, for a job that ended %s", head, d.Status)
	case says("lost") != (d.Status == agent.JobLost):
		return fmt.Sprintf("%q, for a job that ended %s", head, d.Status)
	case d.Status == agent.JobExited && d.ExitCode != nil && !says(fmt.Sprintf("code %d.", *d.ExitCode)):
		return fmt.Sprintf("%q, for a job that exited with code %d", head, *d.ExitCode)
	case d.Status == agent.JobExited && d.ExitCode == nil && !says("without an exit code"):
		return fmt.Sprintf("%q, for a job that exited without an exit code", head)
	}
	_, tail, hasTail := strings.Cut(text, "\n")
	if out == "" {
		if hasTail {
			return fmt.Sprintf("goes on after its first line (%q), for a job without output", tail)
		}
		return ""
	}
	if len(out) > noticeOutputMax {
		cut := len(out) - noticeOutputMax
		for cut < len(out) && !utf8.RuneStart(out[cut]) {
			cut++
		}
		out = "…" + out[cut:]
	}
	if want := fmt.Sprintf("Output (use the job tool's output command with id %d for all of it):\n%s", d.Job, out); tail != want {
		return fmt.Sprintf("repeats the output as %q; the settlement records it as %q", tail, want)
	}
	return ""
}

// The schedule rule (§8.6): a job keeps to its time. A job due at a time
// (its notBefore) starts a run no earlier. A schedule's due times are a
// grid, its first due time (or its first run's start, when it named none)
// plus whole intervals: after each run that was not killed (one that ended,
// or one a restart lost) it goes back to planned, due at the first grid time
// after the run's end, its runs counted one more; it settles only killed.
// With catch-up skip, a schedule that finds itself a whole interval or more
// past its due time moves on to the first grid time ahead before it runs,
// and nothing else moves a due time. The rule follows each job from the
// batches (and, after a reopen, from the store: any due time is on the
// grid) and checks every commit against the virtual clock. And a spec a
// program draws, every one valid, starts: StartJob refuses none.
const ruleSchedule oracleRule = "a-job-keeps-its-time"

// jobTime is what the schedule rule follows of one job.
type jobTime struct {
	every, notBefore int64 // ms; notBefore 0: due at once
	catchUp, rerun   string
	runs             int
	status           string
}

// jobMade notes a job's schedule when its task is made or read back.
func (o *oracle) jobMade(t *storage.Task) {
	var st agent.JobState
	if t.Kind != agent.JobKindName || json.Unmarshal(t.State, &st) != nil {
		return
	}
	o.jobTimes[t.ID] = &jobTime{every: st.Every, notBefore: st.NotBefore, catchUp: st.CatchUp, rerun: st.Rerun, runs: st.Runs, status: t.Status}
}

// jobStarted holds job id, which a host's StartJob of spec made at now,
// to the spec: its state records the interval, the catch-up policy, the
// due time and whether it may run again after a restart, as asked.
func (o *oracle) jobStarted(l progLine, id storage.ID, spec agent.JobSpec) error {
	j := o.jobTimes[id]
	if j == nil {
		return nil // made in a commit the oracle did not see
	}
	want := jobTime{every: spec.Every.Milliseconds(), catchUp: spec.CatchUp}
	if !spec.NotBefore.IsZero() {
		want.notBefore = spec.NotBefore.UnixMilli()
	}
	if spec.RerunSafe {
		want.rerun = "safe"
	}
	if got := (jobTime{every: j.every, notBefore: j.notBefore, catchUp: j.catchUp, rerun: j.rerun}); got != want {
		return o.fail(broke(ruleSchedule, "%s: StartJob made job %d recording %+v; its spec asks %+v", l, id, got, want))
	}
	return nil
}

// jobTimed holds w, a write of a job at seq, to the schedule rule.
func (o *oracle) jobTimed(w storage.Write, by string, seq storage.ID) error {
	j := o.jobTimes[w.ID]
	if j == nil || o.now == nil || w.Type != storage.WritePatch && w.Type != storage.WriteSettle {
		return nil
	}
	now := o.now().UnixMilli()
	was := *j
	if w.Status != "" {
		j.status = w.Status
	}
	var st agent.JobState // a write carries the whole state
	if json.Unmarshal(w.State, &st) == nil && st.Cmd != "" {
		j.notBefore, j.runs = st.NotBefore, st.Runs
	}
	fail := func(format string, args ...any) error {
		return o.fail(broke(ruleSchedule, "%s %s at %d (virtual ms %d): job %d (every %d ms, due at %d, %d runs) %s",
			by, w.Type, seq, now, w.ID, was.every, was.notBefore, was.runs, fmt.Sprintf(format, args...)))
	}
	switch {
	case w.Type == storage.WriteSettle:
		if was.every > 0 && w.Status != agent.JobKilled {
			return fail("settled %s; a schedule ends only killed", w.Status)
		}
	case w.Status == agent.JobRunning && was.status != agent.JobRunning:
		if was.notBefore > 0 && now < was.notBefore {
			return fail("started a run %d ms before it was due", was.notBefore-now)
		}
		if was.every > 0 && was.notBefore == 0 && (j.notBefore > now || j.notBefore <= now-commitSlackMs) {
			return fail("started its first run, keeping the grid from %d; want its start", j.notBefore)
		}
	case w.Status == agent.JobPlanned && was.status == agent.JobRunning:
		if was.every == 0 {
			return fail("went back to planned; only a schedule does")
		}
		if !nextOnGrid(j.notBefore, was.notBefore, was.every, now) || j.runs != was.runs+1 {
			return fail("ended a run due next at %d after %d runs; want due at %d, the first grid time after the end, after %d",
				j.notBefore, j.runs, firstSlotAfter(was.notBefore, was.every, now), was.runs+1)
		}
	case w.Status == "" && j.notBefore != was.notBefore:
		switch {
		case was.every == 0 || was.status != agent.JobPlanned:
			return fail("moved its due time to %d while %s", j.notBefore, was.status)
		case was.catchUp != agent.CatchUpSkip:
			return fail("moved its due time to %d; only catch-up skip moves it", j.notBefore)
		case now < was.notBefore+was.every:
			return fail("moved its due time to %d less than an interval past it", j.notBefore)
		case !nextOnGrid(j.notBefore, was.notBefore, was.every, now):
			return fail("moved its due time to %d; want %d, the first grid time ahead", j.notBefore, firstSlotAfter(was.notBefore, was.every, now))
		}
	}
	return nil
}

// commitSlackMs is how long before the commit that carries it a time a
// method read may be: a hold fault parks a commit for a few virtual
// milliseconds after its method wrote it.
const commitSlackMs = 100

// nextOnGrid reports whether due is the first time on the grid through
// slot by every after a time the method may have read for a commit seen at
// now: on the grid, after now less the slack, and the grid time before it
// not after now.
func nextOnGrid(due, slot, every, now int64) bool {
	return ((due-slot)%every+every)%every == 0 && due > now-commitSlackMs && due-every <= now
}

// firstSlotAfter is the first time after now on the grid through slot by
// every.
func firstSlotAfter(slot, every, now int64) int64 {
	for slot > now {
		slot -= every
	}
	return slot + ((now-slot)/every+1)*every
}

// scheduleSeeds is how often a drawn program with the shell tools starts
// schedules: every third seed from 2, not the golden traces' seed 1.
const scheduleSeeds = 3

// drawSchedules gives the shell program of every scheduleSeeds-th seed,
// from a generator of its own, one or two schedules (job CMD every=MS,
// now and then due a while after the start, with a catch-up policy or
// safe to run again), each followed by sleeps over a few intervals and,
// half the time, a reopen while a run may be under way; and makes about a
// third of its other jobs due a while after their start or safe to run
// again.
func drawSchedules(p *program, seed uint64) {
	if !p.shell || seed%scheduleSeeds != 2 {
		return
	}
	rng := seededRNG(seed, "schedules")
	options := func(l progLine) progLine {
		if rng.IntN(3) == 0 {
			l.args = append(l.args, fmt.Sprintf("after=%d", 100*(1+rng.IntN(20))))
		}
		if rng.IntN(3) == 0 {
			l.args = append(l.args, "rerun")
		}
		return l
	}
	for i, l := range p.lines {
		if l.op == "job" && len(l.args) == 1 && rng.IntN(3) == 0 {
			p.lines[i] = options(progLine{op: "job", args: slices.Clone(l.args)})
		}
	}
	for range 1 + rng.IntN(2) {
		every := 1000 * (1 + rng.IntN(3))
		l := options(progLine{op: "job", args: []string{[]string{"backup", "go test ./...", "flaky"}[rng.IntN(3)], fmt.Sprintf("every=%d", every)}})
		if c := rng.IntN(3); c > 0 {
			l.args = append(l.args, "catchup="+[]string{"", agent.CatchUpOnce, agent.CatchUpSkip}[c])
		}
		block := []progLine{l, {op: "sleep", args: []string{strconv.Itoa(every * (1 + rng.IntN(3)))}}}
		if rng.IntN(2) == 0 {
			block = append(block, progLine{op: "reopen"}, progLine{op: "sleep", args: []string{strconv.Itoa(every * (1 + rng.IntN(2)))}})
		}
		at := rng.IntN(len(p.lines)) // before the final drive
		p.lines = slices.Insert(p.lines, at, block...)
	}
}

// ruleJobRunEnd: a run that a kill or a loss cuts short has no exit code:
// the settled state keeps the run's output as scratch held it, and leaves
// no code, not even an earlier run's of the same schedule.
const ruleJobRunEnd oracleRule = "a-cut-run-has-no-exit-code"

// jobRunsEnded holds batch b's settlements of running jobs, killed or
// lost, to the rule. It runs before abortRows notes the statuses b leaves.
func (o *oracle) jobRunsEnded(inv core.Invocation, byTask bool, b storage.CommitBatch, by string, r storage.Range) error {
	for i, w := range b.Writes {
		if w.Type != storage.WriteSettle || o.kinds[w.ID] != agent.JobKindName || o.statuses[w.ID] != agent.JobRunning ||
			w.Status != agent.JobKilled && w.Status != agent.JobLost {
			continue
		}
		var st struct {
			ExitCode *int `json:"exitCode"`
		}
		if json.Unmarshal(w.State, &st) == nil && st.ExitCode != nil {
			return o.fail(broke(ruleJobRunEnd, "%s settled running job %d %s at %d with exit code %d", by, w.ID, w.Status, r.First+storage.ID(i), *st.ExitCode))
		}
	}
	return nil
}
