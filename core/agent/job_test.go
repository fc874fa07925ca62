package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/proc"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// batchOfEntry returns the index of the batch that wrote entry id, or -1.
func (b *genBatchLog) batchOfEntry(id storage.ID) int {
	for i, batch := range b.batches {
		for _, w := range batch.Writes {
			if w.Type == storage.WriteEntry && w.Entry.ID == id {
				return i
			}
		}
	}
	return -1
}

func out(afterMs int, data string) proc.Chunk {
	return proc.Chunk{AfterMs: afterMs, Stream: proc.StreamStdout, Data: data}
}

// shellScripts are the fake commands the job tests run.
var shellScripts = proc.Scripts{Commands: map[string]proc.Script{
	"make":  {Chunks: []proc.Chunk{out(10, "compiling\n"), out(20, "built\n")}},
	"fail":  {Chunks: []proc.Chunk{{AfterMs: 5, Stream: proc.StreamStderr, Data: "boom\n"}}, ExitCode: 2},
	"slow":  {Chunks: []proc.Chunk{out(0, "start\n"), out(5000, "done\n")}},
	"serve": {Chunks: []proc.Chunk{out(0, "serving\n")}, Hang: true},
	"tick":  {Chunks: []proc.Chunk{out(100, "tick\n")}},
}}

func bashCall(id, command string) ai.Block {
	raw, _ := json.Marshal(map[string]string{"command": command})
	return faux.ToolCall(id, agent.BashToolName, string(raw))
}

func jobCall(id, command string, job storage.ID) ai.Block {
	raw, _ := json.Marshal(map[string]any{"command": command, "id": job})
	return faux.ToolCall(id, agent.JobToolName, string(raw))
}

// shell opens a loop with the shell tools over fake processes.
func shell(t testing.TB, ctx context.Context, s *sim.Sim, store storage.Storage) (*loop, *proc.Env) {
	env := proc.New(s.Runtime(), shellScripts)
	return openAgent(t, ctx, s, agentOptions{store: store, env: env, tools: []agent.Tool{agent.BashTool(), agent.JobTool()}}), env
}

func (a *loop) setBudget(ctx context.Context, c *agent.Conversation, d time.Duration) {
	a.t.Helper()
	must(0, must(c.Settings()).Set(ctx, map[string]any{"budgetMs": d.Milliseconds()}))
}

func (a *loop) task(ctx context.Context, id storage.ID) *storage.Task {
	a.t.Helper()
	t, ok := must2(a.h.GetTask(ctx, id))
	if !ok {
		a.t.Fatalf("no task %d", id)
	}
	return t
}

// waitFor sleeps in virtual time until task id satisfies ok.
func (a *loop) waitFor(ctx context.Context, s *sim.Sim, id storage.ID, what string, ok func(*storage.Task) bool) *storage.Task {
	a.t.Helper()
	for range 100_000 {
		if t, found := must2(a.h.GetTask(ctx, id)); found && ok(t) {
			return t
		}
		must(0, s.Runtime().Sleep(ctx, 10*time.Millisecond))
	}
	a.t.Fatalf("task %d never became %s", id, what)
	return nil
}

func terminal(t *storage.Task) bool { return !t.Live() }

// jobOf is the job a tool call recorded on its task.
func (a *loop) jobOf(ctx context.Context, conv storage.ID, call string) (agent.ToolState, storage.ID) {
	a.t.Helper()
	for _, t := range a.tasksOf(ctx, agent.ToolKindName) {
		st := must(decodeToolState(t))
		if t.ConversationID == conv && st.Call.ID == call {
			if st.Job == nil {
				a.t.Fatalf("call %s recorded no job: %s", call, t.State)
			}
			return st, st.Job.ID
		}
	}
	a.t.Fatalf("no tool task for call %s", call)
	return agent.ToolState{}, 0
}

func decodeToolState(t *storage.Task) (agent.ToolState, error) {
	var st agent.ToolState
	return st, json.Unmarshal(t.State, &st)
}

func jobState(t *storage.Task) agent.JobState {
	var st agent.JobState
	if err := json.Unmarshal(t.State, &st); err != nil {
		panic(err)
	}
	return st
}

func (a *loop) notices(ctx context.Context, conv storage.ID) []agent.JobNoticeData {
	a.t.Helper()
	var out []agent.JobNoticeData
	for _, id := range a.entriesOf(ctx, conv, core.NoticeKind.Kind()) {
		e, _ := must2(a.h.GetEntry(ctx, id))
		var d agent.JobNoticeData
		must(0, json.Unmarshal(e.Data, &d))
		out = append(out, d)
	}
	return out
}

// A bash call that ends within its budget creates its job and records the
// job and its cancellation policy on the call's task in one commit, then
// answers with the job's output; a failing command is an error result.
func TestBashCreatesItsJobAndItsReferenceInOneCommitAndAnswersWithTheOutput(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		store := &genBatchLog{Storage: memory.New()}
		a, _ := shell(t, ctx, s, store)
		a.faux.SetResponses(calling(bashCall("b1", "make"), bashCall("b2", "fail")), answer("built"))
		c := a.h.Root()
		must(c.Prompt(ctx, userText("build it"), agent.AcceptOptions{}))
		for _, call := range []string{"b1", "b2"} {
			st, job := a.jobOf(ctx, c.ID, call)
			if !st.Job.CancelOnAbort || st.Job.Detached {
				t.Fatalf("call %s's job reference = %+v; want cancel on abort, not detached", call, *st.Job)
			}
			together := false
			for _, b := range store.batches {
				var created, referenced bool
				for _, w := range b.Writes {
					created = created || w.Type == storage.WriteTask && w.Task.ID == job && w.Task.Kind == agent.JobKindName && w.Task.Background
					referenced = referenced || w.Type == storage.WritePatch && strings.Contains(string(w.State), fmt.Sprintf(`"job":{"id":%d,"cancelOnAbort":true}`, job))
				}
				together = together || created && referenced
			}
			if !together {
				t.Fatalf("call %s: job %d and the call's reference to it were not written in one batch", call, job)
			}
		}
		res := a.toolResults(ctx, c.ID)
		if got := resultText(res["b1"]); got != "compiling\nbuilt\n" || isError(res["b1"]) {
			t.Fatalf("make's result = %q (error %v); want its output", got, isError(res["b1"]))
		}
		if got := resultText(res["b2"]); !isError(res["b2"]) || got != "boom\nexit code 2" {
			t.Fatalf("fail's result = %q (error %v); want its output and the exit code as an error", got, isError(res["b2"]))
		}
		_, job := a.jobOf(ctx, c.ID, "b1")
		if jt := a.task(ctx, job); jt.Status != agent.JobExited || *jobState(jt).ExitCode != 0 {
			t.Fatalf("job = %s %s; want exited with code 0", jt.Status, jt.State)
		}
		if n := a.notices(ctx, c.ID); len(n) != 0 {
			t.Fatalf("notices %v; a call that waited for its job carries the output, no notice", n)
		}
		must(0, a.h.Close(ctx))
	})
}

// A call that outlives its budget settles at the budget with the output
// so far, delegated to its job and saying so in an info diag; the turn
// ends while the job goes on (the foreground drive does not wait for
// it); the notification request is sticky state of its own, not a patch
// of the job; and the job's end appends exactly one notice.
func TestBudgetExpirySettlesDelegatedAndTheJobGoesOnToNotifyOnce(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a, _ := shell(t, ctx, s, nil)
		c := a.h.Root()
		a.setBudget(ctx, c, time.Second)
		a.faux.SetResponses(calling(bashCall("b", "slow")), answer("it is still running"))
		start := s.Runtime().Now()
		input := must(c.Accept(ctx, userText("run it"), agent.AcceptOptions{}))
		must(c.Drive(ctx))
		if took := s.Runtime().Now().Sub(start); took > 2*time.Second {
			t.Fatalf("the turn took %s; the call's budget is 1s", took)
		}
		if r := a.result(ctx, c, input); r.Status != agent.InputDone {
			t.Fatalf("input = %+v; want done while the job runs", r)
		}
		e := a.toolResults(ctx, c.ID)["b"]
		var data agent.ToolResultData
		must(0, json.Unmarshal(e.Data, &data))
		st, job := a.jobOf(ctx, c.ID, "b")
		switch {
		case resultText(e) != "start\n<harness>\n[info] "+data.Diags[0].Message+"\n</harness>" || isError(e):
			t.Fatalf("result = %q; want the output so far and the diag", resultText(e))
		case data.Delegated != job || len(data.Diags) != 1 || data.Diags[0].Code != "budget" || data.Diags[0].Severity != "info":
			t.Fatalf("result data = %+v; want delegated to job %d with one info budget diag", data, job)
		case st.Job == nil || !st.Job.Detached || st.Job.CancelOnAbort:
			t.Fatalf("the call's job reference after delegation = %+v; want detached", st.Job)
		}
		jt := a.task(ctx, job)
		if jt.Status != agent.JobRunning || strings.Contains(string(jt.State), "notif") {
			t.Fatalf("job after delegation = %s %s; want running, its state untouched by the delegating call", jt.Status, jt.State)
		}
		reqAddr := storage.Address{Scope: storage.Scope{Kind: storage.ScopeConversation, ID: c.ID}, Namespace: "pi.job.notify", Key: fmt.Sprint(job)}
		req, ok := must2(a.h.Store().GetValue(ctx, reqAddr, 0))
		if !ok || !strings.Contains(string(req.Value), `"callId":"b"`) {
			t.Fatalf("notification request = %s (found %v); want one naming the call", req.Value, ok)
		}
		if n := a.notices(ctx, c.ID); len(n) != 0 {
			t.Fatalf("notices before the job ended: %v", n)
		}
		a.waitFor(ctx, s, job, "terminal", terminal)
		n := a.notices(ctx, c.ID)
		if len(n) != 1 || n[0].Job != job || n[0].Status != agent.JobExited || n[0].ExitCode == nil || *n[0].ExitCode != 0 {
			t.Fatalf("notices = %+v; want one: job %d exited 0", n, job)
		}
		if _, ok := must2(a.h.Store().GetValue(ctx, reqAddr, 0)); ok {
			t.Fatal("the notification request is still there after its notice")
		}
		ids := a.entriesOf(ctx, c.ID, core.NoticeKind.Kind())
		notice, _ := must2(a.h.GetEntry(ctx, ids[0]))
		if m := notice.Model[0]; m.Role != ai.RoleSystem || !strings.Contains(m.Content.TextOf(), "exited with code 0") || !strings.Contains(m.Content.TextOf(), "done\n") {
			t.Fatalf("notice message = %+v; want a system message with the exit code and output", m)
		}
		must(0, a.h.Close(ctx))
	})
}

// The job ends at the very instant the call's budget runs out, so across
// seeds the wait sees it finished (no delegation, no notice), or the job
// settles between the budget and the call's settlement (the delegation
// commit places the notice itself), or the delegation lands first (the
// job's end consumes the request). A delegated call always gets exactly
// one notice, and both delegated orders happen.
func TestNotificationAndCompletionInEitherOrderPublishOneNotice(t *testing.T) {
	orders := map[string]int{}
	for seed := uint64(1); seed <= 60; seed++ {
		simtest.Run(t, seed, func(ctx context.Context, s *sim.Sim) {
			store := &genBatchLog{Storage: memory.New()}
			a, _ := shell(t, ctx, s, store)
			c := a.h.Root()
			a.setBudget(ctx, c, 5000*time.Millisecond)
			a.faux.SetResponses(calling(bashCall("b", "slow")), answer("ok"))
			must(c.Prompt(ctx, userText("run it"), agent.AcceptOptions{}))
			_, job := a.jobOf(ctx, c.ID, "b")
			a.waitFor(ctx, s, job, "terminal", terminal)
			res := a.toolResults(ctx, c.ID)["b"]
			var data agent.ToolResultData
			must(0, json.Unmarshal(res.Data, &data))
			notices := a.entriesOf(ctx, c.ID, core.NoticeKind.Kind())
			switch {
			case data.Delegated == 0:
				if len(notices) != 0 {
					t.Fatalf("seed %d: an undelegated call got notices %v", seed, notices)
				}
				orders["waited"]++
			case len(notices) != 1:
				t.Fatalf("seed %d: a delegated call got %d notices; want exactly one", seed, len(notices))
			case store.batchOfEntry(notices[0]) == store.batchOfEntry(res.ID):
				orders["ended first"]++
			default:
				orders["delegated first"]++
			}
			must(0, a.h.Close(ctx))
		})
	}
	if orders["ended first"] == 0 || orders["delegated first"] == 0 {
		t.Fatalf("orders seen: %v; the sweep must reach both delegated orders", orders)
	}
}

// A delegated job that is running when the process stops is recovered as
// lost, with its notice; one declared safe to rerun runs again instead.
func TestRecoverSettlesLostWithItsNoticeOrRerunsASafeJob(t *testing.T) {
	for _, safe := range []bool{false, true} {
		t.Run(fmt.Sprintf("rerun safe %v", safe), func(t *testing.T) {
			simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
				store := simtest.Reopenable{Store: memory.New()}
				a, _ := shell(t, ctx, s, store)
				c := a.h.Root()
				var job storage.ID
				if safe {
					job = must(c.StartJob(ctx, agent.JobSpec{Cmd: "slow", RerunSafe: true}))
				} else {
					a.setBudget(ctx, c, time.Second)
					a.faux.SetResponses(calling(bashCall("b", "slow")), answer("later"))
					must(c.Prompt(ctx, userText("run it"), agent.AcceptOptions{}))
					_, job = a.jobOf(ctx, c.ID, "b")
				}
				simtest.DriveInActor(ctx, s, a.h, nil)
				a.waitFor(ctx, s, job, "running", func(t *storage.Task) bool { return t.Status == agent.JobRunning })
				must(0, s.Runtime().Sleep(ctx, 100*time.Millisecond))
				simtest.CloseCrashed(ctx, a.h)

				b, _ := shell(t, ctx, s, store)
				simtest.DriveInActor(ctx, s, b.h, nil)
				jt := b.waitFor(ctx, s, job, "terminal", terminal)
				st := jobState(jt)
				n := b.notices(ctx, c.ID)
				if safe {
					if jt.Status != agent.JobExited || st.Output.Content[0].Text != "start\ndone\n" || len(n) != 0 {
						t.Fatalf("safe job after reopen = %s, output %+v, notices %v; want exited after a clean rerun", jt.Status, st.Output, n)
					}
				} else {
					if jt.Status != agent.JobLost || st.Output.Content[0].Text != "start\n" || st.ExitCode != nil {
						t.Fatalf("job after reopen = %s %s; want lost with the output its scratch held", jt.Status, jt.State)
					}
					if len(n) != 1 || n[0].Status != agent.JobLost || n[0].Job != job {
						t.Fatalf("notices = %+v; want one lost notice for job %d", n, job)
					}
				}
				must(0, b.h.Close(ctx))
			})
		})
	}
}

// A delegated job that is stopped (by the job tool or a host's AbortTask)
// settles killed with the output it had and its one notice; stop of a job
// that already ended says so and changes nothing.
func TestAStoppedDelegatedJobSettlesKilledWithOneNotice(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a, _ := shell(t, ctx, s, nil)
		c := a.h.Root()
		a.setBudget(ctx, c, time.Second)
		r := a.route()
		r.script(c.ID, calling(bashCall("b", "serve")), answer("serving"))
		must(c.Prompt(ctx, userText("serve"), agent.AcceptOptions{}))
		_, job := a.jobOf(ctx, c.ID, "b")
		r.script(c.ID, calling(jobCall("j1", "output", job)), calling(jobCall("j2", "stop", job)), answer("stopped"))
		must(c.Prompt(ctx, userText("stop it"), agent.AcceptOptions{}))
		jt := a.waitFor(ctx, s, job, "terminal", terminal)
		if jt.Status != agent.JobKilled || jobState(jt).Output.Content[0].Text != "serving\n" {
			t.Fatalf("job = %s %s; want killed with its output", jt.Status, jt.State)
		}
		if text, _ := a.toolResult(ctx, c.ID, "j1"); text != "serving\n" {
			t.Fatalf("job output = %q", text)
		}
		if n := a.notices(ctx, c.ID); len(n) != 1 || n[0].Status != agent.JobKilled {
			t.Fatalf("notices = %+v; want one killed notice", n)
		}
		r.script(c.ID, calling(jobCall("j3", "stop", job)), answer("ok"))
		must(c.Prompt(ctx, userText("stop it again"), agent.AcceptOptions{}))
		if text, _ := a.toolResult(ctx, c.ID, "j3"); !strings.Contains(text, "had already ended: killed") {
			t.Fatalf("second stop = %q", text)
		}
		if n := a.notices(ctx, c.ID); len(n) != 1 {
			t.Fatalf("notices after a second stop = %+v; want still one", n)
		}
		must(0, a.h.Close(ctx))
	})
}

// rerunningJobKind is the job kind with every job treated as safe to rerun
// on recovery, so that a job outlives a restart while its call does not.
type rerunningJobKind struct{ core.TaskKind }

func (k rerunningJobKind) Recover(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	t := *task
	var st map[string]any
	must(0, json.Unmarshal(t.State, &st))
	st["rerun"] = "safe"
	t.State = must(json.Marshal(st))
	return k.TaskKind.Recover(ctx, &t, rt)
}

// Aborting a call that still owns its job kills the job, and the call's
// abort finds the job through the reference on its task: here the abort
// runs in a process that never ran the call's execute.
func TestAFreshToolAbortKillsItsJobThroughTheDurableReference(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		store := simtest.Reopenable{Store: memory.New()}
		a, _ := shell(t, ctx, s, store)
		c := a.h.Root()
		a.faux.SetResponses(calling(bashCall("b", "serve")))
		must(c.Accept(ctx, userText("serve"), agent.AcceptOptions{}))
		simtest.DriveInActor(ctx, s, c, nil)
		for len(a.tasksOf(ctx, agent.JobKindName)) == 0 || a.tasksOf(ctx, agent.JobKindName)[0].Status != agent.JobRunning {
			must(0, s.Runtime().Sleep(ctx, 10*time.Millisecond))
		}
		st, job := a.jobOf(ctx, c.ID, "b")
		simtest.CloseCrashed(ctx, a.h)

		env := proc.New(s.Runtime(), shellScripts)
		b := openAgent(t, ctx, s, agentOptions{store: store, env: env, tools: []agent.Tool{agent.BashTool(), agent.JobTool()},
			replace: []core.TaskKind{rerunningJobKind{agent.JobKind}}})
		var tool storage.ID
		for _, tt := range b.tasksOf(ctx, agent.ToolKindName) {
			if must(decodeToolState(tt)).Call.ID == st.Call.ID {
				tool = tt.ID
			}
		}
		must(0, b.h.AbortTask(ctx, tool))
		simtest.DriveInActor(ctx, s, b.h, nil)
		jt := b.waitFor(ctx, s, job, "terminal", terminal)
		tt := b.waitFor(ctx, s, tool, "terminal", terminal)
		if tt.Status != "aborted" || jt.Status != agent.JobKilled || !jt.Abort {
			t.Fatalf("call %s, job %s (marked %v); want the call aborted and its job killed by its mark", tt.Status, jt.Status, jt.Abort)
		}
		if n := b.notices(ctx, c.ID); len(n) != 0 {
			t.Fatalf("notices %v; a job its call still owned was never delegated", n)
		}
		must(0, b.h.Close(ctx))
	})
}

// A schedule is one task looping planned → running → planned under one
// id, due on a fixed grid; the foreground drive does not wait for it; a
// restart after missed runs runs once (catch-up once) or not at all
// (catch-up skip) and never a backlog; AbortTask ends it wherever it is.
func TestAScheduleCyclesOneStableIDAndARestartRunsNoBacklog(t *testing.T) {
	for _, policy := range []string{agent.CatchUpOnce, agent.CatchUpSkip} {
		t.Run(policy, func(t *testing.T) {
			simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
				store := simtest.Reopenable{Store: memory.New()}
				a, _ := shell(t, ctx, s, store)
				c := a.h.Root()
				rt := s.Runtime()
				start := rt.Now()
				job := must(c.StartJob(ctx, agent.JobSpec{Cmd: "tick", Every: time.Hour, NotBefore: start.Add(time.Hour), CatchUp: policy}))
				if r := must(c.Drive(ctx)); r != core.Idle || rt.Now() != start {
					t.Fatalf("drive = %s after %s; want idle at once: a background schedule is not foreground work", r, rt.Now().Sub(start))
				}
				simtest.DriveInActor(ctx, s, a.h, nil)
				must(0, rt.Sleep(ctx, 3*time.Hour+30*time.Minute))
				jt := a.task(ctx, job)
				st := jobState(jt)
				if jt.Status != agent.JobPlanned || st.Runs != 3 || st.NotBefore != start.Add(4*time.Hour).UnixMilli() || st.Output.Content[0].Text != "tick\n" {
					t.Fatalf("after 3.5h: %s runs %d next %s output %+v; want planned after 3 runs, due at 4h", jt.Status, st.Runs, time.UnixMilli(st.NotBefore).Sub(start), st.Output)
				}
				if len(a.tasksOf(ctx, agent.JobKindName)) != 1 {
					t.Fatalf("%d job tasks; a schedule is one task", len(a.tasksOf(ctx, agent.JobKindName)))
				}
				simtest.CloseCrashed(ctx, a.h)
				must(0, rt.Sleep(ctx, 10*time.Hour)) // the session is down: 10 runs missed

				b, _ := shell(t, ctx, s, store)
				simtest.DriveInActor(ctx, s, b.h, nil)
				must(0, rt.Sleep(ctx, 30*time.Minute))
				st = jobState(b.task(ctx, job))
				wantRuns := map[string]int{agent.CatchUpOnce: 4, agent.CatchUpSkip: 3}[policy]
				if st.Runs != wantRuns || st.NotBefore != start.Add(14*time.Hour).UnixMilli() {
					t.Fatalf("after the restart: runs %d next %s; want %d runs, next at 14h", st.Runs, time.UnixMilli(st.NotBefore).Sub(start), wantRuns)
				}
				must(0, b.h.AbortTask(ctx, job))
				if jt := b.waitFor(ctx, s, job, "terminal", terminal); jt.Status != agent.JobKilled {
					t.Fatalf("aborted schedule = %s; want killed", jt.Status)
				}
				must(0, b.h.Close(ctx))
			})
		})
	}
}

// A job's preview is a tool's: the output state, live from its scratch;
// at every flush the live preview, a replica folded from the task outputs
// and a preview built from durable scratch agree, and after a restart the
// reopened preview equals the last live one.
func TestAJobsPreviewIsATools(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		store := simtest.Reopenable{Store: memory.New()}
		env := proc.New(s.Runtime(), shellScripts)
		r := &previewRun{t: t, store: store, outputs: map[storage.ID][]core.TaskOutput{}, replica: map[storage.ID]any{}}
		r.h = must(agent.Open(ctx, store, agent.Options{Runtime: s.Runtime(), Env: env, CheckInvariants: true,
			OnTaskOutput: func(o core.TaskOutput) { r.check(ctx, o) }}))
		job := must(r.h.Root().StartJob(ctx, agent.JobSpec{Cmd: "slow"}))
		simtest.DriveInActor(ctx, s, r.h, nil)
		must(0, s.Runtime().Sleep(ctx, time.Second))
		live, ok := must2(r.h.Preview(ctx, job))
		if !ok || len(r.outputs[job]) == 0 {
			t.Fatal("the running job has no preview")
		}
		simtest.CloseCrashed(ctx, r.h)
		again := must(agent.Open(ctx, store, agent.Options{Runtime: s.Runtime(), CheckInvariants: true}))
		got, ok := must2(again.Preview(ctx, job))
		if diff := cmp.Diff(live, got); !ok || diff != "" {
			t.Fatalf("preview after reopen (-live +reopened):\n%s", diff)
		}
		var st agent.ToolOutputState
		must(0, json.Unmarshal(must(json.Marshal(got)), &st))
		if st.Content[0].Text != "start\n" {
			t.Fatalf("preview = %+v; want the output so far", st)
		}
		must(0, again.Close(ctx))
	})
}

// A job printing far more than its window keeps the end of it, says how
// much it dropped and where the whole output is, and writes its scratch
// at most once per flush interval once the window overflowed: what it
// puts in the store does not grow with what it prints.
func TestHugeOutputIsWindowedSpilledAndBoundedInTheStore(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		line := strings.Repeat("x", 99) + "\n"
		chunk := strings.Repeat(line, 100) // 10 KB
		var chunks []proc.Chunk
		for range 200 { // 2 MB over 2 s
			chunks = append(chunks, out(10, chunk))
		}
		chunks = append(chunks, out(10, "the end\n"))
		store := &genBatchLog{Storage: memory.New()}
		env := proc.New(s.Runtime(), proc.Scripts{Commands: map[string]proc.Script{"flood": {Chunks: chunks}}})
		a := openAgent(t, ctx, s, agentOptions{store: store, env: env})
		job := must(a.h.Root().StartJob(ctx, agent.JobSpec{Cmd: "flood", Limits: agent.OutputLimits{MaxBytes: 4000}}))
		simtest.DriveInActor(ctx, s, a.h, nil)
		jt := a.waitFor(ctx, s, job, "terminal", terminal)
		o := must(a.h.JobOutput(ctx, job))
		tr := o.Output.Truncation
		switch {
		case jt.Status != agent.JobExited || !strings.HasSuffix(o.Output.Content[0].Text, "the end\n") || len(o.Output.Content[0].Text) > 4000:
			t.Fatalf("job %s, output ends %q (%d bytes); want exited keeping the last 4000 bytes", jt.Status, o.Output.Content[0].Text[max(0, len(o.Output.Content[0].Text)-20):], len(o.Output.Content[0].Text))
		case !tr.Truncated || tr.TotalBytes != 200*len(chunk)+8 || tr.SpillPath != proc.SpillPath(1):
			t.Fatalf("truncation = %+v; want truncated, every byte counted, spilled", tr)
		case len(env.Files()[tr.SpillPath]) != tr.TotalBytes:
			t.Fatalf("spill file holds %d bytes; want all %d", len(env.Files()[tr.SpillPath]), tr.TotalBytes)
		case len(o.Output.Diags) != 1 || !strings.Contains(o.Output.Diags[0].Message, "full output at "+tr.SpillPath):
			t.Fatalf("diags = %+v; want the truncation and where the rest is", o.Output.Diags)
		}
		scratchBytes, scratchWrites := 0, 0
		for _, b := range store.batches {
			if b.Kind == storage.BatchScratch {
				scratchWrites++
				for _, w := range b.Writes {
					scratchBytes += len(w.Value)
				}
			}
		}
		// 2 s at one flush per 250 ms: about 8 windows of 4 KB, not 2 MB.
		if scratchWrites > 12 || scratchBytes > 12*5000 {
			t.Fatalf("%d scratch writes, %d bytes; want the window rewritten at most once per flush interval", scratchWrites, scratchBytes)
		}
		must(0, a.h.Close(ctx))
	})
}

// Bad job input is a typed error naming it, and commits nothing; the job
// tool refuses an id that is not a job of its conversation.
func TestBadJobInputIsATypedErrorAndCommitsNothing(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a, _ := shell(t, ctx, s, nil)
		c := a.h.Root()
		for _, spec := range []agent.JobSpec{{Cmd: " "}, {Cmd: "x", Every: -time.Second}, {Cmd: "x", CatchUp: "all"}, {Cmd: "x", CatchUp: agent.CatchUpSkip},
			{Cmd: "x", Limits: agent.OutputLimits{Retain: "middle"}}, {Cmd: "x", Limits: agent.OutputLimits{MaxBytes: -1, MaxLines: 10}},
			{Cmd: "x", Limits: agent.OutputLimits{MaxBytes: 100, MaxLines: -1}}} {
			before := a.h.Store().LastSeq()
			_, err := c.StartJob(ctx, spec)
			var se *agent.JobSpecError
			if !errors.As(err, &se) || se.Cmd != spec.Cmd || a.h.Store().LastSeq() != before {
				t.Fatalf("StartJob(%+v) = %v; want a JobSpecError naming the command, nothing committed", spec, err)
			}
		}
		_, err := a.h.JobOutput(ctx, 1)
		var nj *agent.NotAJobError
		if !errors.As(err, &nj) || nj.ID != 1 {
			t.Fatalf("JobOutput of a conversation id = %v; want NotAJobError", err)
		}
		a.faux.SetResponses(calling(jobCall("j", "status", 999)), answer("no such job"))
		must(c.Prompt(ctx, userText("status"), agent.AcceptOptions{}))
		if e := a.toolResults(ctx, c.ID)["j"]; !isError(e) || !strings.Contains(resultText(e), "999 is not a job") {
			t.Fatalf("status of a missing job = %q", resultText(e))
		}
		must(0, a.h.Close(ctx))
	})
}

// A schedule whose run is interrupted by a restart loses that run, not
// the schedule: unsafe to rerun now, it goes back to planned for its next
// slot under the same id.
func TestAnInterruptedScheduleLosesTheRunNotTheSchedule(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		store := simtest.Reopenable{Store: memory.New()}
		a, _ := shell(t, ctx, s, store)
		rt := s.Runtime()
		must(0, rt.Sleep(ctx, 17*time.Minute)) // off the hour: the grid is the first run's
		start := rt.Now()
		job := must(a.h.Root().StartJob(ctx, agent.JobSpec{Cmd: "slow", Every: time.Hour}))
		simtest.DriveInActor(ctx, s, a.h, nil)
		must(0, rt.Sleep(ctx, time.Second))
		if jt := a.task(ctx, job); jt.Status != agent.JobRunning {
			t.Fatalf("job = %s; want running", jt.Status)
		}
		simtest.CloseCrashed(ctx, a.h)
		b, _ := shell(t, ctx, s, store)
		simtest.DriveInActor(ctx, s, b.h, nil)
		must(0, rt.Sleep(ctx, time.Second))
		jt := b.task(ctx, job)
		st := jobState(jt)
		if jt.Status != agent.JobPlanned || st.Runs != 1 || st.NotBefore != start.Add(time.Hour).UnixMilli() || st.Output.Content[0].Text != "start\n" || st.ExitCode != nil {
			t.Fatalf("after the restart: %s %s; want planned for the next hour with the lost run's output", jt.Status, jt.State)
		}
		must(0, b.h.Close(ctx))
	})
}

// The job tool's wait on a delegated job that outlives the budget again
// does not delegate it a second time, so its end is still announced once
// (found by review: the second delegation placed a second notice when the
// job ended in between).
func TestAJobToolWaitDoesNotDelegateAgain(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a, _ := shell(t, ctx, s, nil)
		c := a.h.Root()
		a.setBudget(ctx, c, time.Second)
		r := a.route()
		r.script(c.ID, calling(bashCall("b", "slow")), answer("running"))
		must(c.Prompt(ctx, userText("run it"), agent.AcceptOptions{}))
		_, job := a.jobOf(ctx, c.ID, "b")
		r.script(c.ID, calling(jobCall("w", "wait", job)), answer("still running"))
		must(c.Prompt(ctx, userText("wait for it"), agent.AcceptOptions{}))
		var data agent.ToolResultData
		must(0, json.Unmarshal(a.toolResults(ctx, c.ID)["w"].Data, &data))
		if data.Delegated != 0 || len(data.Diags) != 1 || data.Diags[0].Code != "budget" {
			t.Fatalf("the wait's result data = %+v; want the budget diag and no second delegation", data)
		}
		a.waitFor(ctx, s, job, "terminal", terminal)
		if n := a.notices(ctx, c.ID); len(n) != 1 {
			t.Fatalf("notices = %+v; want one", n)
		}
		must(0, a.h.Close(ctx))
	})
}
