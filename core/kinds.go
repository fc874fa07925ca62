package core

import (
	"fmt"
	"slices"

	"github.com/pico-go/pico/storage"
)

// TaskKind is the part of a task kind the commit line needs: its name, its
// initial status and the role of each status. The driver's methods (execute,
// recover, abort) extend it in the driver.
type TaskKind interface {
	Kind() string
	InitialStatus() string
	// Role maps a status to its role; ok is false for an unknown status.
	Role(status string) (role storage.TaskRole, ok bool)
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

// Validate checks that the initial status exists and is a start role, and
// that every role is known.
func (s Statuses) Validate() error {
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
	if s, ok := kind.(interface{ Validate() error }); ok {
		if err := s.Validate(); err != nil {
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
