package simtest

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

// SeedsSweep is how many seeds every concurrency test also runs under.
const SeedsSweep = 200

// Run runs body as the main actor of a fresh simulation with seed and
// fails the test with the seed when the run fails (a panic, a deadlock).
func Run(t testing.TB, seed uint64, body func(ctx context.Context, s *sim.Sim)) {
	t.Helper()
	s := sim.New(sim.Options{Seed: seed})
	if err := s.Run(context.Background(), func(ctx context.Context) { body(ctx, s) }); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
}

// Sweep runs a simulated test under seeds 1 to SeedsSweep, stopping at the
// first seed that fails.
func Sweep(t *testing.T, body func(t testing.TB, ctx context.Context, s *sim.Sim)) {
	t.Helper()
	for seed := uint64(1); seed <= SeedsSweep; seed++ {
		Run(t, seed, func(ctx context.Context, s *sim.Sim) { body(t, ctx, s) })
		if t.Failed() {
			t.Fatalf("failed at seed %d", seed)
		}
	}
}

// Must returns v or panics with err; inside a simulation the panic fails
// the run with the actor's name and stack.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Committer is a conversation handle: the kernel's or the agent's.
type Committer interface {
	Commit(ctx context.Context, plan func(tx *core.ConversationTx) error) (storage.Range, error)
}

// CreateTask creates one task in c and returns its id.
func CreateTask(t testing.TB, ctx context.Context, c Committer, kind storage.Kinder, spec core.TaskSpec) storage.ID {
	t.Helper()
	var id storage.ID
	Must(c.Commit(ctx, func(tx *core.ConversationTx) error {
		id = tx.Task(kind, spec)
		return nil
	}))
	return id
}

// TaskReader reads tasks: a harness, the kernel's or the agent's.
type TaskReader interface {
	GetTask(ctx context.Context, id storage.ID) (*storage.Task, bool, error)
}

// Status reads a task's status.
func Status(t testing.TB, ctx context.Context, h TaskReader, id storage.ID) string {
	t.Helper()
	task, ok, err := h.GetTask(ctx, id)
	if err != nil || !ok {
		t.Fatalf("task %d: %v (found %v)", id, err, ok)
	}
	return task.Status
}

// State decodes a task's state as a JSON object.
func State(t testing.TB, task *storage.Task) map[string]any {
	t.Helper()
	var m map[string]any
	if len(task.State) > 0 {
		if err := json.Unmarshal(task.State, &m); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// CloseCrashed closes the harness of a process whose storage handle was
// replaced by a reopen: its invocations unwind, and closing the dead handle
// reports the crash, which is expected here.
func CloseCrashed(ctx context.Context, h interface{ Close(context.Context) error }) {
	if err := h.Close(ctx); err != nil && !errors.Is(err, fault.ErrCrashed) {
		panic(err)
	}
}

// Reopenable lets a second harness open the same memory store: the first
// harness's Close must not close the durable state.
type Reopenable struct{ *memory.Store }

// Close leaves the store open.
func (Reopenable) Close(context.Context) error { return nil }

// Driver drives a session or a conversation: a harness or a handle.
type Driver interface {
	Drive(ctx context.Context) (core.DriveResult, error)
}

// DriveInActor drives d in a new actor and returns an event set once the
// drive returned; check, when set, runs in that actor with the outcome.
func DriveInActor(ctx context.Context, s *sim.Sim, d Driver, check func(core.DriveResult, error)) core.Event {
	rt := s.Runtime()
	done := rt.NewEvent("drive-returned")
	rt.Go(ctx, "drive", func(ctx context.Context) {
		r, err := d.Drive(ctx)
		if check != nil {
			check(r, err)
		}
		done.Set()
	})
	return done
}

// TaskRoles are the statuses of StepKind.
var TaskRoles = map[string]storage.TaskRole{
	"planned": storage.RoleStart, "running": storage.RoleInflight,
	"done": storage.RoleTerminal, "aborted": storage.RoleTerminal, "failed": storage.RoleTerminal,
}

// StepKind is a plugin kind for tests: execute commits planned → running,
// runs body (when set), then settles done; abort settles aborted; recover
// settles failed.
func StepKind(name string, body func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error) core.KindFuncs {
	settle := func(ctx context.Context, rt *core.TaskRuntime, id storage.ID, status string, state any) error {
		_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
			tx.Settle(id, status, state)
			return nil
		})
		return err
	}
	return core.KindFuncs{
		Statuses: core.Statuses{Name: name, Initial: "planned", Roles: TaskRoles},
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
			return settle(ctx, rt, task.ID, "done", nil)
		},
		RecoverFunc: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			return settle(ctx, rt, task.ID, "failed", map[string]string{"reason": "interrupted"})
		},
		AbortFunc: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			return settle(ctx, rt, task.ID, "aborted", nil)
		},
	}
}
