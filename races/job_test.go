package races

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/proc"
	"github.com/pico-go/pico/storage"
)

// gatedEnv is a fake execution environment whose processes, once they
// ended, wait at the point "exited" (on the job's actor) until the cell
// releases them, so that a cell can hold a job between its process's end
// and its settlement.
type gatedEnv struct {
	*proc.Env
	exited, release core.Event
}

func (g gatedEnv) Exec(ctx context.Context, command string, opts agent.ExecOptions) (agent.ExecResult, error) {
	res, err := g.Env.Exec(ctx, command, opts)
	g.exited.Set()
	sim.Yield(ctx, "exited")
	_ = g.release.Wait(context.WithoutCancel(ctx))
	return res, err
}

// parentCleanupVsTerminalJob: a bash call T waits on its job J, whose
// process has just exited, while the host marks T (§6.3, §10.2). Forward:
// J settles exited first, T's wait ends and T, held in after_tool, is
// marked; its fresh abort finds J already terminal, which is a finished
// cleanup, not an error. Reverse: the mark lands while J is held between
// its process's end and its settlement; T's abort marks J, whose own
// settlement is then refused, and J settles killed. Either way T settles
// aborted, nothing faults, and no notice is written (T never delegated).
func parentCleanupVsTerminalJob(o order) cell {
	const (
		tool storage.ID = 16
		job  storage.ID = 20
	)
	jexec := actor(job, core.MethodExecute)
	points := map[order][]string{
		forward: {label(jexec, "exited"), "host:mark"},
		reverse: {label(jexec, "exited"), "host:mark", "host:release"},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		var (
			toolStatus, jobStatus string
			jobMarked             bool
			notices               int
			reports               []error
		)
		main := func(ctx context.Context) {
			rt := s.Runtime()
			env := gatedEnv{Env: proc.New(rt, proc.Scripts{Commands: map[string]proc.Script{
				"build": {Chunks: []proc.Chunk{{AfterMs: 100, Stream: proc.StreamStdout, Data: "built\n"}}},
			}}), exited: rt.NewEvent("job-exited"), release: rt.NewEvent("job-released")}
			a := openAgent(ctx, s, agentOptions{wholeBlocks: true, env: env, tools: []agent.Tool{agent.BashTool()}})
			c := a.h.Root()
			a.h.Hooks().On(agent.ToolKind, agent.HookAfterTool, core.Hook(func(ctx context.Context, _ agent.AfterToolInput) (any, error) {
				_ = rt.NewEvent("held-until-marked").Wait(ctx)
				return nil, nil
			}), core.HookOptions{})
			args, _ := json.Marshal(map[string]string{"command": "build"})
			a.faux.SetResponses(faux.Reply(faux.ToolCall("call-build", agent.BashToolName, string(args))).WithStop(ai.StopToolUse), say("built"))
			must(c.Accept(ctx, ai.PlainText("build"), agent.AcceptOptions{}))
			g := newGroup(rt)
			g.Go(ctx, "driver", func(ctx context.Context) { must(c.Drive(ctx)) })
			g.Go(ctx, "host", func(ctx context.Context) {
				check(env.exited.Wait(ctx))
				if o == forward {
					env.release.Set()
					check(a.watch.settledEvent(job).Wait(ctx))
				}
				sim.Yield(ctx, "mark")
				check(a.h.AbortTask(ctx, tool))
				if o == reverse {
					check(a.watch.settledEvent(tool).Wait(ctx))
					sim.Yield(ctx, "release")
					env.release.Set()
				}
			})
			g.Wait(ctx)
			check(a.watch.settledEvent(tool).Wait(ctx))
			check(a.watch.settledEvent(job).Wait(ctx))
			ts := must(a.h.GetTasks(ctx, []storage.ID{tool, job}))
			expectID("the bash call", ts[tool].ID, tool)
			if ts[tool].Kind != agent.ToolKindName || ts[job].Kind != agent.JobKindName {
				panic(fmt.Sprintf("tasks %d and %d are %s and %s; the cell's order names the bash call and its job", tool, job, ts[tool].Kind, ts[job].Kind))
			}
			toolStatus, jobStatus, jobMarked = ts[tool].Status, ts[job].Status, ts[job].Abort
			notices = len(must(a.h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 10}, ConversationID: c.ID, Kind: core.NoticeKind.Kind()})).Items)
			reports = a.reports
			check(a.h.Close(ctx))
		}
		verify := func() error {
			wantJob, wantMarked := map[order]string{forward: agent.JobExited, reverse: agent.JobKilled}[o], o == reverse
			switch {
			case toolStatus != "aborted":
				return fmt.Errorf("the bash call settled %s; want aborted", toolStatus)
			case jobStatus != wantJob || jobMarked != wantMarked:
				return fmt.Errorf("the job is %s (marked %v); want %s (marked %v): cleanup marks only what is still live", jobStatus, jobMarked, wantJob, wantMarked)
			case notices != 0:
				return fmt.Errorf("%d notices; the call never delegated its job", notices)
			case len(reports) != 0:
				return fmt.Errorf("reports %v; an already-terminal job is a finished cleanup, not a fault", reports)
			}
			return nil
		}
		return main, verify
	}}
}
