package fault

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/storage"
)

// Recorder receives every firing and release. *sim.Sim implements it: the
// events go into the run's trace with the step and actor. Record must not
// call back into the wrapper.
type Recorder interface {
	Record(kind string, detail any)
}

// RecordKind is the kind under which firings are recorded.
const RecordKind = "fault"

// Events of a Firing.
const (
	EventFire    = "fire"    // the fault hit its commit
	EventRelease = "release" // Release ended a hold (or pre-released it)
	EventDrop    = "drop"    // the handle died while the hold kept its commit: never persisted
)

// Firing is what the wrapper records when a fault fires or a hold ends.
type Firing struct {
	Name  string `json:"name"`
	Kind  Kind   `json:"kind"`
	Event string `json:"event"`
	// Commit is the ordinal of the commit hit through this handle, 1-based
	// (0 for a hold released before it fired).
	Commit   int               `json:"commit"`
	Batch    storage.BatchKind `json:"batch"`
	FirstSeq storage.ID        `json:"firstSeq"`
	// Persisted says whether the batch was durable when the event happened.
	Persisted bool `json:"persisted"`
	// Tasks are, for unlinkFail, the settled tasks whose scratch unlink failed.
	Tasks []storage.ID `json:"tasks,omitempty"`
	// Torn is, for a crash with Tear, where the batch's line was cut; nil
	// when nothing was written (the store rejected the batch, or it had no
	// writes).
	Torn *TornLine `json:"torn,omitempty"`
	// Missed says the fault changed nothing: the store refused the batch
	// (or, for a fail with Tear, had nothing to write) before the fault
	// could hit it, and the commit got the store's own answer. A missed
	// fail or uncertain fault does not stop the session.
	Missed bool `json:"missed,omitempty"`
	// Broken is, for a fail with Tear, what the store kept of the batch
	// whose write failed ("" when nothing, as it must be): its last
	// sequence moved, a file not as it was, or a read answering otherwise.
	Broken string `json:"broken,omitempty"`
}

// Storage is a storage.Storage that injects the faults of a plan into the
// commits that pass through it and passes reads through to the inner store.
// It is safe for the one-writer, many-readers use that storage.Storage
// allows, under the real runtime as under the simulated one.
type Storage struct {
	rt    core.Runtime
	inner storage.Storage
	plan  Plan
	rec   Recorder
	holds map[string]*hold
	// disk is set on a handle of WrapDisk: the inner store is this
	// process's open of the files, which Close closes and Restart replaces.
	disk *Disk

	mu       sync.Mutex
	commits  int
	byBatch  map[storage.BatchKind]int
	settling int
	// byKind counts the commits that settled a task of each kind, when a
	// fault of the plan names one (Fault.Settles); kinds says whether any
	// does, since only then does a commit look up its settled tasks.
	byKind map[string]int
	kinds  bool
	fired  []Firing
	closed bool
	// uncertain is the error of the uncertain commit that poisoned the
	// handle; Commit refuses while it is set.
	uncertain error
	// dead is non-nil once the handle's process died; every call but LastSeq
	// returns it. lastSeq is then what the process last knew.
	dead     error
	lastSeq  storage.ID
	reopened bool
	// innerClosed says the inner store of a disk handle was closed.
	innerClosed bool
	// diskErr is why a fault could not shape the files as its plan says (a
	// torn crash that could not cut its line, an unlinkFail that could not
	// keep the retired scratch); Restart refuses to open them.
	diskErr error
}

// hold is the state of one hold fault. held is set when the hold fires,
// release when Release names it (or when the handle dies).
type hold struct {
	fault         Fault
	held, release core.Event
	firing        *Firing // the fire event, once it fired
	released      bool
}

var _ storage.Storage = (*Storage)(nil)

// Wrap returns a handle over inner that injects plan's faults and records
// them to rec (nil records nothing). An invalid plan is a programmer error
// and panics; plans read from outside go through ParsePlan first.
// A plan that tears a line (Fault.Tear) panics too: a memory store has no
// bytes to tear; WrapDisk wraps stores that do.
func Wrap(rt core.Runtime, inner storage.Storage, plan Plan, rec Recorder) *Storage {
	if err := plan.Validate(); err != nil {
		panic("fault: Wrap with an invalid plan: " + err.Error())
	}
	if f, ok := plan.tears(false); ok {
		panic(fmt.Sprintf("fault: Wrap with a plan that tears a line (%s): a store without files has nothing to tear; use WrapDisk", f))
	}
	return wrap(rt, inner, plan, rec, nil)
}

// wrap builds a handle over a validated plan.
func wrap(rt core.Runtime, inner storage.Storage, plan Plan, rec Recorder, disk *Disk) *Storage {
	if rec == nil {
		rec = nopRecorder{}
	}
	plan.Faults = slices.Clone(plan.Faults) // the handle owns its plan
	s := &Storage{rt: rt, inner: inner, plan: plan, rec: rec, disk: disk, holds: map[string]*hold{}, byBatch: map[storage.BatchKind]int{}, byKind: map[string]int{}}
	for _, f := range plan.Faults {
		s.kinds = s.kinds || f.Settles != ""
		if f.Kind == Hold {
			s.holds[f.Name] = &hold{fault: f, held: rt.NewEvent("fault:" + f.Name + ":held"), release: rt.NewEvent("fault:" + f.Name)}
		}
	}
	return s
}

type nopRecorder struct{}

func (nopRecorder) Record(string, any) {}

// Plan returns the handle's plan.
func (s *Storage) Plan() Plan { return Plan{Faults: slices.Clone(s.plan.Faults)} }

// Fired returns every firing, release and drop of this handle, in order.
func (s *Storage) Fired() []Firing {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fired)
}

// Broken returns the first firing whose store kept something of a batch
// whose write failed (Firing.Broken), or false.
func (s *Storage) Broken() (Firing, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.fired {
		if f.Broken != "" {
			return f, true
		}
	}
	return Firing{}, false
}

// UnlinkFailures returns the firings of unlinkFail faults: the settles whose
// scratch retirement committed but whose unlink failed. The memory backend
// retires scratch inside the commit and has no unlink that could fail, so
// for it this is only a record. On a handle of WrapDisk whose Disk names its
// files the failure is real: every file the settling commit removed is put
// back, so the retired scratch stays on disk for the next open to ignore.
func (s *Storage) UnlinkFailures() []Firing {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Firing
	for _, f := range s.fired {
		if f.Kind == UnlinkFail && f.Event == EventFire {
			out = append(out, f)
		}
	}
	return out
}

// LastSeq is the inner store's last committed sequence. It cannot fail, so
// on a dead handle it returns what the process last knew: the sequence
// before the commit that crashed it, or the one current when Reopen replaced
// it.
func (s *Storage) LastSeq() storage.ID {
	s.mu.Lock()
	dead, known := s.dead != nil, s.lastSeq
	s.mu.Unlock()
	if dead {
		return known
	}
	return s.inner.LastSeq()
}

// usable returns the error every call on a dead or closed handle gets.
func (s *Storage) usable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.dead != nil:
		return s.dead
	case s.closed:
		return storage.ErrClosed
	}
	return nil
}

// Close closes the handle: later calls fail with storage.ErrClosed. Over a
// memory store the inner store stays open, because it stands for the
// durable bytes that outlive the process; whoever created it closes it (and
// Reopen may still open a new handle over it). A handle of WrapDisk opened
// its inner store itself and closes it, as the process closing its files.
func (s *Storage) Close(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.dead != nil:
		s.mu.Unlock()
		return s.dead
	case s.closed:
		s.mu.Unlock()
		return storage.ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	if s.disk == nil {
		return nil
	}
	return s.closeInner(ctx)
}

// Release ends the named hold: its commit proceeds to persistence. Releasing
// before the hold fires lets the commit pass the hold without pausing (it is
// still a scheduling point); releasing twice does nothing. Naming no hold of
// the plan is a programmer error and panics.
func (s *Storage) Release(name string) {
	h := s.hold(name, "Release")
	s.mu.Lock()
	if h.released {
		s.mu.Unlock()
		return
	}
	h.released = true
	f := Firing{Name: name, Kind: Hold, Event: EventRelease}
	if h.firing != nil {
		f.Commit, f.Batch, f.FirstSeq = h.firing.Commit, h.firing.Batch, h.firing.FirstSeq
	}
	s.log(f)
	s.mu.Unlock()
	h.release.Set()
}

// WaitHeld blocks until the named hold has fired, that is until its commit
// is constructed and paused before persistence, or until ctx is done. If the
// handle dies first it returns the handle's error. Naming no hold of the plan
// is a programmer error and panics.
func (s *Storage) WaitHeld(ctx context.Context, name string) error {
	h := s.hold(name, "WaitHeld")
	if err := h.held.Wait(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.firing == nil {
		return s.dead
	}
	return nil
}

func (s *Storage) hold(name, call string) *hold {
	h := s.holds[name]
	if h == nil {
		panic(fmt.Sprintf("fault: %s(%q): the plan has no hold of that name", call, name))
	}
	return h
}

// Reopen is the restart of the handle's process: this handle dies (every
// later call returns an error wrapping ErrCrashed; a commit it holds is
// dropped, never persisted) and the returned handle, with its own plan and
// commit ordinals starting at 1, reads and writes the same inner store. For
// the memory backend the inner store is exactly the committed state; a
// durable backend that must reread its files (and discard a torn last line)
// is wrapped with WrapDisk and restarted with Restart, which rereads them.
// Reopening one handle twice, or reopening a handle of WrapDisk, is a
// programmer error and panics.
func (s *Storage) Reopen(plan Plan) *Storage {
	if s.disk != nil {
		panic("fault: Reopen of a handle made by WrapDisk: use Restart, which opens the files again and can fail")
	}
	s.replace("Reopen")
	return Wrap(s.rt, s.inner, plan, s.rec)
}

// replace kills the handle because a restarted process replaces it.
func (s *Storage) replace(call string) {
	s.mu.Lock()
	if s.reopened {
		s.mu.Unlock()
		panic("fault: " + call + " called twice on one handle: two processes would share its storage")
	}
	s.reopened = true
	s.mu.Unlock()
	s.die(fmt.Errorf("%w: the handle was replaced by %s", ErrCrashed, call), s.inner.LastSeq())
}

// die kills the handle: it records and wakes every hold that keeps a commit
// (the commit returns err, unpersisted) and wakes every WaitHeld.
func (s *Storage) die(err error, lastSeq storage.ID) {
	s.mu.Lock()
	if s.dead != nil {
		s.mu.Unlock()
		return
	}
	s.dead, s.lastSeq = err, lastSeq
	var wake []core.Event
	for _, f := range s.plan.Faults {
		h := s.holds[f.Name]
		if h == nil {
			continue
		}
		if h.firing != nil && !h.released {
			drop := *h.firing
			drop.Event = EventDrop
			s.log(drop)
		}
		wake = append(wake, h.held, h.release)
	}
	s.mu.Unlock()
	for _, e := range wake {
		e.Set()
	}
}

// log appends a firing and records it. s.mu must be held, so that the
// recorder sees firings in the order Fired returns them.
func (s *Storage) log(f Firing) {
	s.fired = append(s.fired, f)
	s.rec.Record(RecordKind, f)
}
