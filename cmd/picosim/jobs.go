package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/proc"
	"github.com/pico-go/pico/storage"
)

// The job scenarios (§8.3, §8.6): a bash call that outlives its budget and
// later notifies, a schedule across a restart, and an abort that kills a
// job. Their host actions are "budget", "wait", "start schedule", "stop
// and reopen", "abort" and "stop schedule".

// shellScripts are the fake commands of the shell scenarios.
var shellScripts = proc.Scripts{Commands: map[string]proc.Script{
	"go test ./...": {Chunks: []proc.Chunk{
		{AfterMs: 200, Stream: proc.StreamStdout, Data: "ok  \tpico/core\t1.2s\n"},
		{AfterMs: 4000, Stream: proc.StreamStdout, Data: "ok  \tpico/sim\t4.0s\n"},
	}},
	"backup": {Chunks: []proc.Chunk{{AfterMs: 500, Stream: proc.StreamStdout, Data: "backed up\n"}}},
	"serve":  {Chunks: []proc.Chunk{{Stream: proc.StreamStdout, Data: "listening on :8080\n"}}, Hang: true, IgnoreKillMs: 300},
	"flaky":  {Chunks: []proc.Chunk{{AfterMs: 300, Stream: proc.StreamStderr, Data: "warming up\n"}}, Crash: "segmentation fault"},
	"lint":   {Chunks: []proc.Chunk{{AfterMs: 150, Stream: proc.StreamStdout, Data: "main.go:3:2: x declared and not used\n"}}, ExitCode: 1},
}}

// bashCall is the model calling bash.
func bashCall(id, command string) ai.Block {
	raw, err := json.Marshal(map[string]string{"command": command})
	if err != nil {
		panic(err) // a literal command
	}
	return faux.ToolCall(id, agent.BashToolName, string(raw))
}

// jobsOf lists the session's jobs.
func (e *env) jobsOf(ctx context.Context) ([]*storage.Task, error) {
	return storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Task], error) {
		return e.h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: c, Kind: agent.JobKindName})
	})
}

// notices counts conv's notices of job.
func (e *env) notices(ctx context.Context, conv, job storage.ID) (int, error) {
	entries, err := storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Entry], error) {
		return e.h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: c, ConversationID: conv, Kind: core.NoticeKind.Kind()})
	})
	n := 0
	for _, en := range entries {
		var d agent.JobNoticeData
		if json.Unmarshal(en.Data, &d) == nil && d.Job == job {
			n++
		}
	}
	return n, err
}

// waitJob sleeps in virtual time until job is terminal or limit passed.
func (e *env) waitJob(ctx context.Context, job storage.ID, limit time.Duration) (*storage.Task, error) {
	rt := e.s.Runtime()
	until := rt.Now().Add(limit)
	for {
		t, ok, err := e.h.GetTask(ctx, job)
		if err != nil || !ok {
			return nil, fmt.Errorf("job %d: %v (found %v)", job, err, ok)
		}
		if !t.Live() || !rt.Now().Before(until) {
			return t, nil
		}
		if err := rt.Sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// bashOutlivesBudget: the model runs the test suite with a budget shorter
// than it takes (unless the host action leaves the budget out); the call
// settles delegated, the turn ends while the job runs, and the job's end
// appends exactly one notice, which the next turn's request carries.
func bashOutlivesBudget(ctx context.Context, e *env) error {
	c, err := e.h.Conversation(ctx, root)
	if err != nil {
		return err
	}
	short := e.host("budget 1s")
	if short {
		if err := func() error {
			cfg, err := c.Settings()
			if err != nil {
				return err
			}
			return cfg.Set(ctx, map[string]any{"budgetMs": 1000})
		}(); err != nil {
			return err
		}
	}
	e.faux.SetResponses(faux.Reply(bashCall("call-test", "go test ./...")).WithStop(ai.StopToolUse), reply("the tests are running"), reply("the tests passed"))
	if err := e.turn(ctx, "run the tests"); err != nil {
		return err
	}
	jobs, err := e.jobsOf(ctx)
	if err != nil {
		return err
	}
	if len(jobs) != 1 {
		return fmt.Errorf("%d jobs; want the one bash made", len(jobs))
	}
	job := jobs[0].ID
	if e.host("wait for the job") {
		if _, err := e.h.Drive(ctx); err != nil {
			return err
		}
		t, err := e.waitJob(ctx, job, time.Minute)
		if err != nil {
			return err
		}
		if t.Status != agent.JobExited {
			return fmt.Errorf("job %d is %s a minute on; want exited", job, t.Status)
		}
		n, err := e.notices(ctx, root, job)
		if err != nil {
			return err
		}
		var delegated bool
		for _, r := range mustResults(ctx, e, root) {
			delegated = delegated || r == job
		}
		if want := map[bool]int{true: 1, false: 0}[delegated]; n != want {
			return fmt.Errorf("job %d (delegated %v) has %d notices; want %d", job, delegated, n, want)
		}
		if short && !delegated {
			return fmt.Errorf("a 5 s job under a 1 s budget was not delegated")
		}
		if err := e.turn(ctx, "how did the tests go"); err != nil {
			return err
		}
	}
	return e.settled(ctx, nil)
}

// mustResults lists the jobs conv's tool results delegated to.
func mustResults(ctx context.Context, e *env, conv storage.ID) []storage.ID {
	entries, _ := storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Entry], error) {
		return e.h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: c, ConversationID: conv, Kind: core.ToolResultKind.Kind()})
	})
	var out []storage.ID
	for _, en := range entries {
		var d agent.ToolResultData
		if json.Unmarshal(en.Data, &d) == nil && d.Delegated != 0 {
			out = append(out, d.Delegated)
		}
	}
	return out
}

// scheduleRestart: a UI starts an hourly backup; after a few runs the
// process stops for half a day and a new one reopens: the schedule is the
// same task, runs once for everything it missed and keeps its grid; the
// host then stops it.
func scheduleRestart(ctx context.Context, e *env) error {
	rt := e.s.Runtime()
	start := rt.Now()
	if !e.host("start schedule") {
		return e.settled(ctx, nil)
	}
	c, err := e.h.Conversation(ctx, root)
	if err != nil {
		return err
	}
	job, err := c.StartJob(ctx, agent.JobSpec{Cmd: "backup", Every: time.Hour, NotBefore: start.Add(time.Hour)})
	if err != nil {
		return err
	}
	if r, err := e.h.Drive(ctx); err != nil || r != core.Idle {
		return fmt.Errorf("drive with only a schedule = %s, %v; want idle at once", r, err)
	}
	if err := rt.Sleep(ctx, time.Duration(2*60+e.s.Rand().IntN(60))*time.Minute); err != nil {
		return err
	}
	before, err := e.jobState(ctx, job)
	if err != nil {
		return err
	}
	reopened, err := e.stopAndReopen(ctx)
	if err != nil {
		return err
	}
	if reopened {
		if err := rt.Sleep(ctx, 12*time.Hour); err != nil {
			return err
		}
		if _, err := e.h.Drive(ctx); err != nil {
			return err
		}
	}
	if err := rt.Sleep(ctx, 30*time.Minute); err != nil {
		return err
	}
	after, err := e.jobState(ctx, job)
	if err != nil {
		return err
	}
	jobs, err := e.jobsOf(ctx)
	switch {
	case err != nil:
		return err
	case len(jobs) != 1 || jobs[0].ID != job:
		return fmt.Errorf("%d jobs; a schedule is one task", len(jobs))
	case after.Runs > before.Runs+2 || after.Runs < before.Runs:
		return fmt.Errorf("the schedule ran %d times before the restart and %d after; a restart runs no backlog", before.Runs, after.Runs)
	case (after.NotBefore-start.UnixMilli())%time.Hour.Milliseconds() != 0:
		return fmt.Errorf("the next run at %d is off the hourly grid from %d", after.NotBefore, start.UnixMilli())
	}
	if e.host("stop schedule") {
		if err := e.h.AbortTask(ctx, job); err != nil {
			return err
		}
		t, err := e.waitJob(ctx, job, time.Minute)
		if err != nil {
			return err
		}
		if t.Status != agent.JobKilled {
			return fmt.Errorf("the stopped schedule is %s; want killed", t.Status)
		}
	}
	return e.settled(ctx, nil)
}

func (e *env) jobState(ctx context.Context, job storage.ID) (agent.JobState, error) {
	t, ok, err := e.h.GetTask(ctx, job)
	if err != nil || !ok {
		return agent.JobState{}, fmt.Errorf("job %d: %v (found %v)", job, err, ok)
	}
	var st agent.JobState
	return st, json.Unmarshal(t.State, &st)
}

// abortKillsJob: the model starts a server, which never exits and shrugs
// off TERM for a while; the host aborts the conversation while the call
// waits on it: the call settles aborted and its job is killed, with no
// notice, since the call never delegated it.
func abortKillsJob(ctx context.Context, e *env) error {
	e.faux.SetResponses(faux.Reply(bashCall("call-serve", "serve")).WithStop(ai.StopToolUse), reply("serving"))
	id, err := e.accept(ctx, root, agent.ModeFollowUp, "start the server")
	if err != nil {
		return err
	}
	done := e.driveAsync(ctx, root)
	if err := e.s.Runtime().Sleep(ctx, time.Duration(100+e.s.Rand().IntN(2000))*time.Millisecond); err != nil {
		return err
	}
	aborted, err := e.abort(ctx, root)
	if err != nil {
		return err
	}
	if !aborted {
		// Nothing stops the call but its budget, three virtual minutes.
		done.Wait(ctx)
		return e.settled(ctx, nil)
	}
	done.Wait(ctx)
	if err := e.expect(ctx, root, id, agent.InputCancelled); err != nil {
		return err
	}
	jobs, err := e.jobsOf(ctx)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		t, err := e.waitJob(ctx, j.ID, time.Minute)
		if err != nil {
			return err
		}
		if t.Status != agent.JobKilled {
			return fmt.Errorf("job %d is %s after its call was aborted; want killed", j.ID, t.Status)
		}
		if n, err := e.notices(ctx, root, j.ID); err != nil || n != 0 {
			return fmt.Errorf("job %d has %d notices (%v); its call never delegated it", j.ID, n, err)
		}
	}
	return e.settled(ctx, nil)
}
