package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// A job's settlement is held to the method that makes it and to the notice
// its commit appends; a settlement by another task is held to the notice
// alone.
func TestAJobEndsAsItsMethodSays(t *testing.T) {
	says := map[string]string{agent.JobKilled: "Job 7 (serve) was stopped.", agent.JobLost: "Job 7 (serve) was lost: the session stopped while it ran.",
		agent.JobExited: "Job 7 (serve) ended without an exit code."}
	const output = "Output (use the job tool's output command with id 7 for all of it):\n"
	// out is the output the settlement records, text the notice's message.
	withOutput := func(status, notice string, code *int, out, text string) storage.CommitBatch {
		b := storage.CommitBatch{Kind: storage.BatchMain}
		if notice != "" {
			data, _ := json.Marshal(agent.JobNoticeData{Job: 7, Cmd: "serve", Status: notice, ExitCode: code})
			msg := []ai.Message{{Role: ai.RoleSystem, Content: ai.PlainText(text)}}
			b.Writes = append(b.Writes, storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 11, ConversationID: 1, Kind: core.NoticeKind.Kind(), Data: data, Model: msg}})
		}
		state, _ := json.Marshal(map[string]any{"output": map[string]any{"content": []map[string]string{{"type": "text", "text": out}}}})
		b.Writes = append(b.Writes, storage.Write{Type: storage.WriteSettle, ID: 7, Status: status, Role: storage.RoleTerminal, State: state})
		return b
	}
	// The output says "was stopped." too: only the first line tells.
	told := func(status, notice string, code *int, text string) storage.CommitBatch {
		return withOutput(status, notice, code, "was stopped.", text+"\n"+output+"was stopped.")
	}
	settle := func(status string, notice string) storage.CommitBatch { return told(status, notice, nil, says[notice]) }
	long := strings.Repeat("é", 1500) // 3,000 bytes
	three := 3
	own := func(m core.Method) core.Invocation { return core.Invocation{Task: 7, ConversationID: 1, Method: m} }
	cases := []struct {
		name   string
		inv    core.Invocation
		byTask bool
		b      storage.CommitBatch
		broken bool
	}{
		{name: "an execute exits", inv: own(core.MethodExecute), byTask: true, b: settle(agent.JobExited, "")},
		{name: "a recover that ran again exits", inv: own(core.MethodRecover), byTask: true, b: settle(agent.JobExited, agent.JobExited)},
		{name: "a recover loses the run", inv: own(core.MethodRecover), byTask: true, b: settle(agent.JobLost, agent.JobLost)},
		{name: "an abort kills", inv: own(core.MethodAbort), byTask: true, b: settle(agent.JobKilled, agent.JobKilled)},
		{name: "a recover that kills", inv: own(core.MethodRecover), byTask: true, b: settle(agent.JobKilled, ""), broken: true},
		{name: "an abort that loses", inv: own(core.MethodAbort), byTask: true, b: settle(agent.JobLost, ""), broken: true},
		{name: "an abort that exits", inv: own(core.MethodAbort), byTask: true, b: settle(agent.JobExited, ""), broken: true},
		{name: "an execute that loses", inv: own(core.MethodExecute), byTask: true, b: settle(agent.JobLost, ""), broken: true},
		{name: "a notice of another end", inv: own(core.MethodRecover), byTask: true, b: settle(agent.JobLost, agent.JobExited), broken: true},
		{name: "another task's settlement with its notice", inv: core.Invocation{Task: 9, Method: core.MethodExecute}, byTask: true, b: settle(agent.JobKilled, agent.JobKilled)},
		{name: "another task's settlement with a wrong notice", inv: core.Invocation{Task: 9, Method: core.MethodExecute}, byTask: true, b: settle(agent.JobKilled, agent.JobLost), broken: true},
		{name: "an exit with its code", inv: own(core.MethodExecute), byTask: true, b: told(agent.JobExited, agent.JobExited, &three, "Job 7 (serve) exited with code 3.")},
		{name: "an exit told as a stop", inv: own(core.MethodExecute), byTask: true, b: told(agent.JobExited, agent.JobExited, nil, says[agent.JobKilled]), broken: true},
		{name: "a kill told as an exit", inv: own(core.MethodAbort), byTask: true, b: told(agent.JobKilled, agent.JobKilled, nil, says[agent.JobExited]), broken: true},
		{name: "a loss told as an exit", inv: own(core.MethodRecover), byTask: true, b: told(agent.JobLost, agent.JobLost, nil, says[agent.JobExited]), broken: true},
		{name: "an exit told with another code", inv: own(core.MethodExecute), byTask: true, b: told(agent.JobExited, agent.JobExited, &three, "Job 7 (serve) exited with code 0."), broken: true},
		{name: "an exit with a code told without", inv: own(core.MethodExecute), byTask: true, b: told(agent.JobExited, agent.JobExited, &three, says[agent.JobExited]), broken: true},
		{name: "a notice naming another job", inv: own(core.MethodAbort), byTask: true, b: told(agent.JobKilled, agent.JobKilled, nil, "Job 8 (serve) was stopped."), broken: true},
		{name: "no output, none repeated", inv: own(core.MethodAbort), byTask: true, b: withOutput(agent.JobKilled, agent.JobKilled, nil, "", says[agent.JobKilled])},
		{name: "output not repeated", inv: own(core.MethodAbort), byTask: true, b: withOutput(agent.JobKilled, agent.JobKilled, nil, "done", says[agent.JobKilled]), broken: true},
		{name: "other output repeated", inv: own(core.MethodAbort), byTask: true, b: withOutput(agent.JobKilled, agent.JobKilled, nil, "done", says[agent.JobKilled]+"\n"+output+"don"), broken: true},
		{name: "output where there is none", inv: own(core.MethodAbort), byTask: true, b: withOutput(agent.JobKilled, agent.JobKilled, nil, "", says[agent.JobKilled]+"\n"+output+"x"), broken: true},
		{name: "a long output's end, cut at a character", inv: own(core.MethodAbort), byTask: true, b: withOutput(agent.JobKilled, agent.JobKilled, nil, "x"+long, says[agent.JobKilled]+"\n"+output+"…"+strings.Repeat("é", 1000))},
		{name: "a long output whole", inv: own(core.MethodAbort), byTask: true, b: withOutput(agent.JobKilled, agent.JobKilled, nil, long, says[agent.JobKilled]+"\n"+output+long), broken: true},
		{name: "a notice without a message", inv: own(core.MethodAbort), byTask: true, b: func() storage.CommitBatch {
			b := settle(agent.JobKilled, agent.JobKilled)
			b.Writes[0].Entry.Model = nil
			return b
		}(), broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			o.kinds[7] = agent.JobKindName
			w := tc.b.Writes[len(tc.b.Writes)-1]
			holdsOrBreaks(t, o.jobEnded(tc.inv, tc.byTask, w, tc.b, "a test", 12), ruleJobEnd, tc.broken)
		})
	}
}

// holdsOrBreaks fails t unless err is nil, or with broken a violation of
// rule.
func holdsOrBreaks(t *testing.T, err error, rule oracleRule, broken bool) {
	t.Helper()
	var oe *oracleError
	switch {
	case broken && (!errors.As(err, &oe) || oe.Rule != rule):
		t.Fatalf("got %v; want the rule %s broken", err, rule)
	case !broken && err != nil:
		t.Fatalf("got %v; want it to hold", err)
	}
}

// A job keeps to its time: a run starts no earlier than due; a schedule's
// next due time is the first grid time after a run's end, its runs one
// more; it settles only killed; only catch-up skip, a whole interval late,
// moves a due time, to the first grid time ahead.
func TestAJobKeepsItsTime(t *testing.T) {
	const due, every = 10_000, 1_000
	state := func(st agent.JobState) json.RawMessage {
		st.Cmd = "backup"
		raw, _ := json.Marshal(st)
		return raw
	}
	schedule := agent.JobState{Every: every, NotBefore: due}
	type step struct {
		at int64 // virtual ms
		w  storage.Write
	}
	patch := func(status string, st agent.JobState) storage.Write {
		return storage.Write{Type: storage.WritePatch, ID: 4, Status: status, State: state(st)}
	}
	running := func(st agent.JobState, at int64) storage.Write { st.StartedAt = at; return patch(agent.JobRunning, st) }
	next := func(notBefore int64, runs int) storage.Write {
		return patch(agent.JobPlanned, agent.JobState{Every: every, NotBefore: notBefore, Runs: runs})
	}
	settle := func(status string) storage.Write {
		return storage.Write{Type: storage.WriteSettle, ID: 4, Status: status, State: state(schedule)}
	}
	cases := []struct {
		name   string
		job    agent.JobState
		steps  []step
		broken bool
	}{
		{name: "runs when due, next on the grid", job: schedule, steps: []step{{due, running(schedule, due)}, {due + 2_500, next(due+3_000, 1)}}},
		{name: "runs early", job: schedule, steps: []step{{due - 1, running(schedule, due-1)}}, broken: true},
		{name: "next off the grid", job: schedule, steps: []step{{due, running(schedule, due)}, {due + 2_500, next(due+3_500, 1)}}, broken: true},
		{name: "next a slot too late", job: schedule, steps: []step{{due, running(schedule, due)}, {due + 2_500, next(due+4_000, 1)}}, broken: true},
		{name: "runs not counted", job: schedule, steps: []step{{due, running(schedule, due)}, {due + 2_500, next(due+3_000, 0)}}, broken: true},
		{name: "killed", job: schedule, steps: []step{{due, running(schedule, due)}, {due + 10, settle(agent.JobKilled)}}},
		{name: "a schedule settles exited", job: schedule, steps: []step{{due, running(schedule, due)}, {due + 10, settle(agent.JobExited)}}, broken: true},
		{name: "a one-off goes back to planned", job: agent.JobState{NotBefore: due}, steps: []step{{due, running(agent.JobState{NotBefore: due}, due)}, {due + 10, next(due+1_000, 1)}}, broken: true},
		{name: "a first run keeps the grid from its start", job: agent.JobState{Every: every}, steps: []step{{due, running(agent.JobState{Every: every, NotBefore: due}, due)}}},
		{name: "a first run keeps the grid from elsewhere", job: agent.JobState{Every: every}, steps: []step{{due, running(agent.JobState{Every: every, NotBefore: due - 5_000}, due)}}, broken: true},
		{name: "skip moves on, a whole interval late", job: agent.JobState{Every: every, NotBefore: due, CatchUp: agent.CatchUpSkip},
			steps: []step{{due + 2_300, patch("", agent.JobState{Every: every, NotBefore: due + 3_000, CatchUp: agent.CatchUpSkip})}}},
		{name: "skip moves on too soon", job: agent.JobState{Every: every, NotBefore: due, CatchUp: agent.CatchUpSkip},
			steps: []step{{due + 500, patch("", agent.JobState{Every: every, NotBefore: due + 1_000, CatchUp: agent.CatchUpSkip})}}, broken: true},
		{name: "once moves on", job: schedule, steps: []step{{due + 2_300, patch("", agent.JobState{Every: every, NotBefore: due + 3_000})}}, broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			var now int64
			o.now = func() time.Time { return time.UnixMilli(now) }
			created := main1(storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 4, ConversationID: 1, Kind: agent.JobKindName, Status: agent.JobPlanned, State: state(tc.job)}})
			if err := o.commit(core.Invocation{}, false, storage.Range{First: 1, Last: 1}, created); err != nil {
				t.Fatal(err)
			}
			var err error
			for i, s := range tc.steps {
				now = s.at
				if err = o.jobTimed(s.w, "a test", storage.ID(10+i)); err != nil {
					break
				}
			}
			holdsOrBreaks(t, err, ruleSchedule, tc.broken)
		})
	}
}

// The shell programs of every scheduleSeeds-th seed start schedules, and
// they parse back; no other program does.
func TestSchedulesAreDrawnForTheirSeeds(t *testing.T) {
	drawn := 0
	for seed := uint64(1); seed <= 60; seed++ {
		p := drawProgram(seed)
		text := p.String()
		has := strings.Contains(text, " every=")
		if want := p.shell && seed%scheduleSeeds == 2; has != want {
			t.Fatalf("seed %d: schedules %v; want %v:\n%s", seed, has, want, text)
		}
		if back, err := parseProgram(text); err != nil || back.String() != text {
			t.Fatalf("seed %d: the program does not parse back (%v):\n%s", seed, err, text)
		}
		if has {
			drawn++
		}
	}
	if drawn == 0 {
		t.Fatal("no program in 60 seeds starts a schedule")
	}
}

// A job a host starts records what its spec asked.
func TestTheScheduleRuleHoldsAJobToItsSpec(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	spec := agent.JobSpec{Cmd: "backup", Every: 2 * time.Second, CatchUp: agent.CatchUpSkip, RerunSafe: true, NotBefore: now.Add(time.Second)}
	check := func(st agent.JobState) error {
		o := newOracle()
		raw, _ := json.Marshal(st)
		o.jobMade(&storage.Task{ID: 9, Kind: agent.JobKindName, State: raw})
		return o.jobStarted(progLine{op: "job", args: []string{"backup"}}, 9, spec)
	}
	kept := agent.JobState{Cmd: "backup", Every: 2000, CatchUp: agent.CatchUpSkip, Rerun: "safe", NotBefore: now.Add(time.Second).UnixMilli()}
	if err := check(kept); err != nil {
		t.Fatalf("a job as asked: %v", err)
	}
	for name, change := range map[string]func(*agent.JobState){
		"no rerun":       func(s *agent.JobState) { s.Rerun = "" },
		"no catch-up":    func(s *agent.JobState) { s.CatchUp = "" },
		"another period": func(s *agent.JobState) { s.Every = 1000 },
		"due at once":    func(s *agent.JobState) { s.NotBefore = 0 },
	} {
		st := kept
		change(&st)
		var oe *oracleError
		if err := check(st); !errors.As(err, &oe) || oe.Rule != ruleSchedule {
			t.Errorf("%s: %v; want %s broken", name, err, ruleSchedule)
		}
	}
}

// A running job that is killed or lost settles without an exit code; a
// planned one keeps its last run's, and a run that exited has its own.
func TestACutRunHasNoExitCode(t *testing.T) {
	check := func(before, status, state string) error {
		o := newOracle()
		o.kinds[4], o.statuses[4] = agent.JobKindName, before
		b := storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteSettle, ID: 4, Status: status, State: json.RawMessage(state)}}}
		return o.jobRunsEnded(core.Invocation{Task: 4, Method: core.MethodAbort}, true, b, "task 4's abort", storage.Range{First: 9, Last: 9})
	}
	for _, tc := range [][3]string{
		{agent.JobRunning, agent.JobKilled, `{"exitCode":null}`},
		{agent.JobRunning, agent.JobLost, `{}`},
		{agent.JobPlanned, agent.JobKilled, `{"exitCode":1}`},
		{agent.JobRunning, agent.JobExited, `{"exitCode":0}`},
	} {
		if err := check(tc[0], tc[1], tc[2]); err != nil {
			t.Errorf("%s job settled %s with %s: %v", tc[0], tc[1], tc[2], err)
		}
	}
	var oe *oracleError
	if err := check(agent.JobRunning, agent.JobKilled, `{"exitCode":0}`); !errors.As(err, &oe) || oe.Rule != ruleJobRunEnd {
		t.Errorf("a killed run keeping a code: %v; want a %s violation", err, ruleJobRunEnd)
	}
}
