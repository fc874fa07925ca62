package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// seedsSweep is how many seeds every concurrency test also runs under.
const seedsSweep = 200

// simRun runs body as the main actor of a fresh simulation and fails the
// test with the seed when the run fails.
func simRun(t testing.TB, seed uint64, body func(ctx context.Context, s *sim.Sim)) {
	t.Helper()
	s := sim.New(sim.Options{Seed: seed})
	if err := s.Run(context.Background(), func(ctx context.Context) { body(ctx, s) }); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
}

// sweep runs a simulated test under seed 1 and then under seedsSweep seeds.
func sweep(t *testing.T, body func(t testing.TB, ctx context.Context, s *sim.Sim)) {
	t.Helper()
	for seed := uint64(1); seed <= seedsSweep; seed++ {
		simRun(t, seed, func(ctx context.Context, s *sim.Sim) { body(t, ctx, s) })
		if t.Failed() {
			t.Fatalf("failed at seed %d", seed)
		}
	}
}

// must returns v or panics with err; inside a simulation the panic fails
// the run with the actor's name and stack.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func open(t testing.TB, ctx context.Context, s *sim.Sim, store storage.Storage, kinds ...core.TaskKind) *core.Harness {
	t.Helper()
	if store == nil {
		store = memory.New()
	}
	h, err := core.Open(ctx, store, core.Options{Runtime: s.Runtime(), TaskKinds: kinds})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var taskRoles = map[string]storage.TaskRole{
	"planned": storage.RoleStart, "running": storage.RoleInflight,
	"done": storage.RoleTerminal, "aborted": storage.RoleTerminal, "failed": storage.RoleTerminal,
}

// stepKind runs: planned → running (commit), then a caller-supplied body,
// then settles done. Its abort settles aborted; recover settles failed.
func stepKind(name string, body func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error) core.KindFuncs {
	return core.KindFuncs{
		Statuses: core.Statuses{Name: name, Initial: "planned", Roles: taskRoles},
		ExecuteFunc: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Patch(task.ID, core.TaskPatch{Status: "running"})
				return nil
			}); err != nil {
				return err
			}
			if body != nil {
				if err := body(ctx, task, rt); err != nil {
					return err
				}
			}
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Settle(task.ID, "done", nil)
				return nil
			})
			return err
		},
		RecoverFunc: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Settle(task.ID, "failed", map[string]string{"reason": "interrupted"})
				return nil
			})
			return err
		},
		AbortFunc: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Settle(task.ID, "aborted", nil)
				return nil
			})
			return err
		},
	}
}

func createTask(t testing.TB, ctx context.Context, c *core.Conversation, kind storage.Kinder, spec core.TaskSpec) storage.ID {
	t.Helper()
	var id storage.ID
	must(c.Commit(ctx, func(tx *core.ConversationTx) error {
		id = tx.Task(kind, spec)
		return nil
	}))
	return id
}

func status(t testing.TB, ctx context.Context, h *core.Harness, id storage.ID) string {
	t.Helper()
	task, ok, err := h.GetTask(ctx, id)
	if err != nil || !ok {
		t.Fatalf("task %d: %v (found %v)", id, err, ok)
	}
	return task.Status
}

func state(t testing.TB, task *storage.Task) map[string]any {
	t.Helper()
	var m map[string]any
	if len(task.State) > 0 {
		if err := json.Unmarshal(task.State, &m); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// closeCrashed closes the harness of a process whose storage handle was
// replaced by a reopen: its invocations unwind, and closing the dead handle
// reports the crash, which is expected here.
func closeCrashed(ctx context.Context, h *core.Harness) {
	if err := h.Close(ctx); err != nil && !errors.Is(err, fault.ErrCrashed) {
		panic(err)
	}
}
