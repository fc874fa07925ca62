package core

import (
	"context"
	"fmt"
	"slices"

	"github.com/pico-go/pico/storage"
)

// TaskKind is a kind of durable work (§5.2): its statuses and their roles,
// and the three methods the driver calls. A method returns after making a
// committed status transition or settling (abort must settle); returning an
// error other than the cancellation of its own invocation is a contract
// fault that stops the session. Domain failures are statuses, not errors.
// A method that has settled its task returns without waiting for anything
// but its runtime: under the real runtime, what the settlement made
// runnable starts once the method returns or calls on its runtime again
// (handon.go).
type TaskKind interface {
	Kind() string
	InitialStatus() string
	// Role maps a status to its role; ok is false for an unknown status.
	Role(status string) (role storage.TaskRole, ok bool)
	// Execute runs a task whose role is start and whose dependencies are terminal.
	Execute(ctx context.Context, task *storage.Task, rt *TaskRuntime) error
	// Recover runs a task found inflight: intent was committed, the outcome
	// of the effect is unknown.
	Recover(ctx context.Context, task *storage.Task, rt *TaskRuntime) error
	// Abort runs in a fresh invocation after a durable abort mark, once the
	// previous invocation has returned; it must settle the task.
	Abort(ctx context.Context, task *storage.Task, rt *TaskRuntime) error
}

// ConfigDeclarer is a task kind that declares the conversation values it
// reads, by name (§5.2).
type ConfigDeclarer interface {
	Config() map[string]storage.Address
}

// KindFuncs is a TaskKind built from functions, for plugins and tests. A
// nil method returns an error that faults the session if it is called.
type KindFuncs struct {
	Statuses
	ExecuteFunc func(ctx context.Context, task *storage.Task, rt *TaskRuntime) error
	RecoverFunc func(ctx context.Context, task *storage.Task, rt *TaskRuntime) error
	AbortFunc   func(ctx context.Context, task *storage.Task, rt *TaskRuntime) error
	// ConfigValues is what Config returns.
	ConfigValues map[string]storage.Address
}

func (k KindFuncs) Execute(ctx context.Context, t *storage.Task, rt *TaskRuntime) error {
	return k.call("execute", k.ExecuteFunc, ctx, t, rt)
}

func (k KindFuncs) Recover(ctx context.Context, t *storage.Task, rt *TaskRuntime) error {
	return k.call("recover", k.RecoverFunc, ctx, t, rt)
}

func (k KindFuncs) Abort(ctx context.Context, t *storage.Task, rt *TaskRuntime) error {
	return k.call("abort", k.AbortFunc, ctx, t, rt)
}

func (k KindFuncs) Config() map[string]storage.Address { return k.ConfigValues }

func (k KindFuncs) call(method string, fn func(context.Context, *storage.Task, *TaskRuntime) error, ctx context.Context, t *storage.Task, rt *TaskRuntime) error {
	if fn == nil {
		return fmt.Errorf("core: task kind %q has no %s method", k.Name, method)
	}
	return fn(ctx, t, rt)
}

// Statuses is a TaskKind's status map, ready to embed.
type Statuses struct {
	Name    string
	Initial string
	Roles   map[string]storage.TaskRole
}

func (s Statuses) Kind() string          { return s.Name }
func (s Statuses) InitialStatus() string { return s.Initial }

func (s Statuses) Role(status string) (storage.TaskRole, bool) {
	r, ok := s.Roles[status]
	return r, ok
}

// ValidateStatuses checks that the initial status exists and is a start
// role, and that every role is known.
func (s Statuses) ValidateStatuses() error {
	if s.Name == "" {
		return fmt.Errorf("core: task kind without a name")
	}
	if r, ok := s.Roles[s.Initial]; !ok || r != storage.RoleStart {
		return fmt.Errorf("core: task kind %q: initial status %q must map to role start", s.Name, s.Initial)
	}
	for st, r := range s.Roles {
		if !r.Valid() {
			return fmt.Errorf("core: task kind %q: status %q has unknown role %q", s.Name, st, r)
		}
	}
	return nil
}

// Kinds is the registry of entry and task kinds, by name. Registering a kind
// under an existing name replaces it, which is how a built-in is swapped.
// A registry is configured before the line starts and read-only afterwards.
type Kinds struct {
	entries map[string]storage.Kinder
	tasks   map[string]TaskKind
}

// NewKinds returns a registry holding the built-in entry kinds.
func NewKinds() *Kinds {
	k := &Kinds{entries: map[string]storage.Kinder{}, tasks: map[string]TaskKind{}}
	for _, e := range BuiltinEntryKinds() {
		k.AddEntry(e)
	}
	return k
}

// AddEntry registers an entry kind, replacing one of the same name.
func (k *Kinds) AddEntry(kind storage.Kinder) {
	if kind.Kind() == "" {
		panic("core: entry kind without a name")
	}
	k.entries[kind.Kind()] = kind
}

// AddTask registers a task kind, replacing one of the same name.
func (k *Kinds) AddTask(kind TaskKind) error {
	if s, ok := kind.(interface{ ValidateStatuses() error }); ok {
		if err := s.ValidateStatuses(); err != nil {
			return err
		}
	}
	if _, ok := kind.Role(kind.InitialStatus()); !ok {
		return fmt.Errorf("core: task kind %q: initial status %q has no role", kind.Kind(), kind.InitialStatus())
	}
	k.tasks[kind.Kind()] = kind
	return nil
}

// Entry returns the entry kind registered under name.
func (k *Kinds) Entry(name string) (storage.Kinder, bool) {
	e, ok := k.entries[name]
	return e, ok
}

// TaskNames lists the registered task kinds, sorted.
func (k *Kinds) TaskNames() []string {
	names := make([]string, 0, len(k.tasks))
	for n := range k.tasks {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Task returns the task kind registered under name.
func (k *Kinds) Task(name string) (TaskKind, bool) {
	t, ok := k.tasks[name]
	return t, ok
}

// EntryNames lists the registered entry kinds, sorted.
func (k *Kinds) EntryNames() []string {
	names := make([]string, 0, len(k.entries))
	for n := range k.entries {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// UnregisteredEntryKinds returns the stored entry kind strings that have no
// registered kind. It reads the stored set, never the entries.
func (k *Kinds) UnregisteredEntryKinds(stored []string) []string {
	var out []string
	for _, s := range stored {
		if _, ok := k.entries[s]; !ok {
			out = append(out, s)
		}
	}
	return out
}
