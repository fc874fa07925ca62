package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// sweepSeeds is how many seeds the default run explores.
const sweepSeeds = 50

// pipelineRoles are the statuses of the demonstration kinds.
var pipelineRoles = map[string]storage.TaskRole{
	"planned": storage.RoleStart, "running": storage.RoleInflight, "done": storage.RoleTerminal, "aborted": storage.RoleTerminal,
}

// stage is a demonstration task kind: it records intent, "works" for a
// while of virtual time writing progress to its scratch, and settles.
func stage(name string, work time.Duration) core.KindFuncs {
	progress := storage.ScratchList[int]("progress")
	return core.KindFuncs{
		Statuses: core.Statuses{Name: name, Initial: "planned", Roles: pipelineRoles},
		ExecuteFunc: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Patch(task.ID, core.TaskPatch{Status: "running"})
				return nil
			}); err != nil {
				return err
			}
			p, err := rt.Progress(ctx)
			if err != nil {
				return err
			}
			for step := range 3 {
				if err := rt.Sleep(ctx, rt.Now().Add(work/3)); err != nil {
					return err
				}
				p.Write(func(sc core.ScratchTx) error { sc.Append(progress.Address, step); return nil })
			}
			_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Settle(task.ID, "done", map[string]any{"steps": 3})
				return nil
			})
			return err
		},
		AbortFunc: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "aborted", nil); return nil })
			return err
		},
	}
}

// pipelineRun is one seeded run: two parallel stages and a third after
// both, in one conversation, driven to idle under the simulated runtime.
func pipelineRun(seed uint64) (digest string, commits int, steps int, err error) {
	trace := sim.NewTrace(nil, false)
	s := sim.New(sim.Options{Seed: seed, Trace: trace})
	fetch, build, report := stage("fetch", 300*time.Millisecond), stage("build", 500*time.Millisecond), stage("report", 100*time.Millisecond)
	err = s.Run(context.Background(), func(ctx context.Context) {
		h, err := core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), TaskKinds: []core.TaskKind{fetch, build, report}, CheckInvariants: true})
		if err != nil {
			panic(err)
		}
		if _, err := h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			a := tx.Task(fetch, core.TaskSpec{})
			b := tx.Task(build, core.TaskSpec{})
			tx.Task(report, core.TaskSpec{After: []storage.ID{a, b}})
			return nil
		}); err != nil {
			panic(err)
		}
		if _, err := h.Root().Drive(ctx); err != nil {
			panic(err)
		}
		commits = int(h.Store().LastSeq())
		if err := h.Close(ctx); err != nil {
			panic(err)
		}
	})
	return trace.Digest(), commits, s.Steps(), err
}

// sweep runs the pipeline under every seed twice and checks that each seed
// replays to the same trace digest.
func sweep(w io.Writer, timing bool) (failures int) {
	start := time.Now()
	distinct := map[string]bool{}
	for seed := uint64(1); seed <= sweepSeeds; seed++ {
		d1, commits, steps, err1 := pipelineRun(seed)
		d2, _, _, err2 := pipelineRun(seed)
		switch {
		case err1 != nil || err2 != nil:
			failures++
			fmt.Fprintf(w, "✗ seed %d: %v %v\n", seed, err1, err2)
		case d1 != d2:
			failures++
			fmt.Fprintf(w, "✗ seed %d: the replay differs (%s vs %s)\n", seed, d1[:12], d2[:12])
		case seed <= 3:
			fmt.Fprintf(w, "✓ seed %d: %d sequence numbers, %d scheduling decisions, trace %s\n", seed, commits, steps, d1[:12])
		}
		distinct[d1] = true
	}
	fmt.Fprintf(w, "DONE %d seeds, each replayed; %d distinct interleavings; %d failures", sweepSeeds, len(distinct), failures)
	if timing {
		fmt.Fprintf(w, " in %.2fs", time.Since(start).Seconds())
	}
	fmt.Fprintln(w)
	return failures
}
