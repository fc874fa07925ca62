package races

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// The driver rows run a whole session: core.Open over a store, task kinds
// built from functions, drive callers, and a journal of what every actor did
// in the order it did it. Ids are a pure function of the program (the root
// conversation of an empty store is 1 and every later write takes the next
// sequence), so a cell names the invocation actors it orders ("task2.execute")
// before the run, and expectID checks that the program minted what it named.

// rootID is the root conversation an empty store's Open creates.
const rootID storage.ID = 1

// taskRoles is the status graph of every kind in the matrix.
var taskRoles = map[string]storage.TaskRole{
	"planned": storage.RoleStart, "running": storage.RoleInflight,
	"done": storage.RoleTerminal, "aborted": storage.RoleTerminal, "failed": storage.RoleTerminal,
}

type methodFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error

// raceKind is a kind whose execute is given; its recover settles failed and
// its abort settles aborted, unless the row replaces them.
func raceKind(name string, execute methodFunc) core.KindFuncs {
	return core.KindFuncs{
		Statuses:    core.Statuses{Name: name, Initial: "planned", Roles: taskRoles},
		ExecuteFunc: execute,
		RecoverFunc: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			return settle(ctx, rt, task.ID, "failed")
		},
		AbortFunc: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			return settle(ctx, rt, task.ID, "aborted")
		},
	}
}

// transition commits a status change of the invocation's own task.
func transition(ctx context.Context, rt *core.TaskRuntime, id storage.ID, status string) error {
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		tx.Patch(id, core.TaskPatch{Status: status})
		return nil
	})
	return err
}

// settle commits the invocation's own task terminal.
func settle(ctx context.Context, rt *core.TaskRuntime, id storage.ID, status string) error {
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		tx.Settle(id, status, nil)
		return nil
	})
	return err
}

// openSession opens a harness on the simulated runtime; a nil store is a
// fresh memory store.
func openSession(ctx context.Context, s *sim.Sim, store storage.Storage, kinds ...core.TaskKind) *core.Harness {
	if store == nil {
		store = memory.New()
	}
	return must(core.Open(ctx, store, core.Options{Runtime: s.Runtime(), CheckInvariants: true, TaskKinds: kinds}))
}

// createTasks commits one task per kind into conversation conv, in one
// batch, and returns their ids.
func createTasks(ctx context.Context, h *core.Harness, conv storage.ID, kinds ...storage.Kinder) []storage.ID {
	ids := make([]storage.ID, len(kinds))
	must(h.Commit(ctx, func(tx *core.Tx) error {
		for i, k := range kinds {
			ids[i] = tx.Task(k, core.TaskSpec{ConversationID: conv})
		}
		return nil
	}))
	return ids
}

// expectID panics when the program minted another id than the one its
// forced order names: the labels would then order the wrong actors.
func expectID(what string, got, want storage.ID) {
	if got != want {
		panic(fmt.Sprintf("%s got id %d; the cell's order names %d", what, got, want))
	}
}

// taskStatus reads a task's stored status.
func taskStatus(ctx context.Context, store storage.Storage, id storage.ID) string {
	got := must(store.GetTasks(ctx, []storage.ID{id}))
	t, ok := got[id]
	if !ok {
		panic(fmt.Sprintf("task %d is not stored", id))
	}
	return t.Status
}

// actor names a task invocation actor the way the driver does.
func actor(task storage.ID, m core.Method) string { return fmt.Sprintf("task%d.%s", task, m) }

// label is a forced-order label: "actor:point".
func label(actorName, point string) string { return actorName + ":" + point }

// journal is what the actors of one run did, in the order they did it.
// Exactly one actor runs at a time, so appends need no lock.
type journal struct{ lines []string }

func (j *journal) add(format string, args ...any) {
	j.lines = append(j.lines, fmt.Sprintf(format, args...))
}

// has reports whether line was journalled.
func (j *journal) has(line string) bool { return slices.Contains(j.lines, line) }

// count is how often line was journalled.
func (j *journal) count(line string) int {
	n := 0
	for _, l := range j.lines {
		if l == line {
			n++
		}
	}
	return n
}

// inOrder checks that the lines were journalled in this order (as a
// subsequence: other lines may come between them).
func (j *journal) inOrder(lines ...string) error {
	at := 0
	for _, l := range lines {
		i := slices.Index(j.lines[at:], l)
		if i < 0 {
			return fmt.Errorf("want %q in this order, but %q did not follow; journal: %s", lines, l, j)
		}
		at += i + 1
	}
	return nil
}

func (j *journal) String() string { return "[" + strings.Join(j.lines, "; ") + "]" }

// invocations watches every invocation of the row's tasks: it journals
// each start and return and notes any two invocations of one task that
// overlap, which "one invocation per task" forbids.
type invocations struct {
	j        *journal
	active   map[storage.ID]string // task → the method running now
	overlaps []string
	runtimes map[*core.TaskRuntime]bool
	reused   int
}

func newInvocations(j *journal) *invocations {
	return &invocations{j: j, active: map[storage.ID]string{}, runtimes: map[*core.TaskRuntime]bool{}}
}

// enter journals "<task> <method> start" and returns the function that
// journals its return; wrap a method body with defer v.enter(...)().
func (v *invocations) enter(task storage.ID, rt *core.TaskRuntime) func() {
	m := string(rt.Method())
	if other, busy := v.active[task]; busy {
		v.overlaps = append(v.overlaps, fmt.Sprintf("task %d %s started while its %s ran", task, m, other))
	}
	if v.runtimes[rt] {
		v.reused++
	}
	v.runtimes[rt] = true
	v.active[task] = m
	v.j.add("task %d %s start", task, m)
	return func() {
		delete(v.active, task)
		v.j.add("task %d %s return", task, m)
	}
}

// check reports overlapping invocations and reused runtimes.
func (v *invocations) check() error {
	switch {
	case len(v.overlaps) > 0:
		return fmt.Errorf("invocations overlapped: %s", strings.Join(v.overlaps, "; "))
	case v.reused > 0:
		return fmt.Errorf("%d invocations reused an earlier invocation's runtime; every invocation gets a fresh one", v.reused)
	}
	return nil
}

// wrapped returns kind with every method watched by v.
func (v *invocations) wrapped(kind core.KindFuncs) core.KindFuncs {
	wrap := func(m methodFunc) methodFunc {
		if m == nil {
			return nil
		}
		return func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			defer v.enter(task.ID, rt)()
			return m(ctx, task, rt)
		}
	}
	kind.ExecuteFunc, kind.RecoverFunc, kind.AbortFunc = wrap(kind.ExecuteFunc), wrap(kind.RecoverFunc), wrap(kind.AbortFunc)
	return kind
}

// group starts actors and lets the main actor wait until all have returned.
type group struct {
	rt   core.Runtime
	left int
	done core.Event
}

func newGroup(rt core.Runtime) *group { return &group{rt: rt, done: rt.NewEvent("group")} }

// Go starts fn as actor name.
func (g *group) Go(ctx context.Context, name string, fn func(ctx context.Context)) {
	g.left++
	g.rt.Go(ctx, name, func(ctx context.Context) {
		defer func() {
			if g.left--; g.left == 0 {
				g.done.Set()
			}
		}()
		fn(ctx)
	})
}

// Wait waits until every actor started so far has returned.
func (g *group) Wait(ctx context.Context) {
	if g.left > 0 {
		check(g.done.Wait(ctx))
	}
}

// must returns v or panics with err; the simulator reports the panic with
// the actor's name.
func must[T any](v T, err error) T {
	check(err)
	return v
}
