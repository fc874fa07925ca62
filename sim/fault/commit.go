package fault

import (
	"context"
	"fmt"
	"slices"

	"github.com/pico-go/pico/storage"
)

// admission is what the handle decided about a commit when it arrived: its
// ordinal and the faults that hit it.
type admission struct {
	ordinal  int
	batch    storage.BatchKind
	firstSeq storage.ID
	holds    []*hold
	end      *Fault // the fail, uncertain or crash fault that hits it, if any
	unlink   *Fault
	settled  []storage.ID
}

// Commit passes the batch to the inner store unless a fault of the plan
// selects it: holds pause it first, then a fail, uncertain or crash fault
// decides its outcome, and an unlinkFail fault is recorded once it
// succeeded (on a handle of WrapDisk with files, after putting back the
// scratch files the commit unlinked).
//
// A hold waits without ctx's cancellation. Reaching Commit means the batch
// was constructed and admitted; the commit line already calls Commit with a
// context that cannot be cancelled, so that an admitted commit is never
// abandoned halfway, and a hold that gave up on cancellation would invent an
// outcome no backend has. Only Release, or the death of the handle (Reopen,
// Restart), ends a hold; a hold nobody releases is reported by the simulator as a
// deadlock naming the event "fault:<name>".
func (s *Storage) Commit(ctx context.Context, batch storage.CommitBatch) (storage.Range, error) {
	kinds, err := s.settledKinds(ctx, batch)
	if err != nil {
		return storage.Range{}, err
	}
	a, err := s.admit(batch, kinds)
	if err != nil {
		return storage.Range{}, err
	}
	for _, h := range a.holds {
		if err := s.pause(ctx, a, h); err != nil {
			return storage.Range{}, err
		}
	}
	if a.end != nil {
		return s.finish(ctx, a, batch)
	}
	var r storage.Range
	if a.unlink != nil && s.disk != nil && len(s.disk.Files) > 0 {
		r, err = s.commitKeepingUnlinked(ctx, *a.unlink, batch)
	} else {
		r, err = s.inner.Commit(ctx, batch)
	}
	if err == nil && a.unlink != nil {
		s.fire(a, *a.unlink, true, a.settled)
	}
	return r, err
}

// settledKinds lists the kinds of the tasks batch settles, each once, when
// a fault of the plan selects by kind (nil otherwise): from the batch for a
// task it creates, else from the inner store.
func (s *Storage) settledKinds(ctx context.Context, batch storage.CommitBatch) ([]string, error) {
	settled := settledTasks(batch)
	if !s.kinds || len(settled) == 0 {
		return nil, nil
	}
	created := map[storage.ID]string{}
	var stored []storage.ID
	for _, w := range batch.Writes {
		if w.Type == storage.WriteTask && w.Task != nil {
			created[w.Task.ID] = w.Task.Kind
		}
	}
	var kinds []string
	add := func(k string) {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	for _, id := range settled {
		if k, ok := created[id]; ok {
			add(k)
		} else {
			stored = append(stored, id)
		}
	}
	if len(stored) > 0 {
		tasks, err := s.inner.GetTasks(ctx, stored)
		if err != nil {
			return nil, fmt.Errorf("fault: reading the kinds of the tasks a commit settles: %w", err)
		}
		for _, id := range stored {
			if t := tasks[id]; t != nil {
				add(t.Kind)
			}
		}
	}
	return kinds, nil
}

// admit counts the commit and picks the faults that select it; kinds are
// the kinds of the tasks it settles, when the plan asks (settledKinds).
func (s *Storage) admit(batch storage.CommitBatch, kinds []string) (*admission, error) {
	first := s.inner.LastSeq() + 1
	settled := settledTasks(batch)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.dead != nil:
		return nil, s.dead
	case s.closed:
		return nil, storage.ErrClosed
	case s.uncertain != nil:
		return nil, fmt.Errorf("%w; reopen before committing again", s.uncertain)
	}
	s.commits++
	s.byBatch[batch.Kind]++
	if len(settled) > 0 {
		s.settling++
	}
	for _, k := range kinds {
		s.byKind[k]++
	}
	a := &admission{ordinal: s.commits, batch: batch.Kind, firstSeq: first, settled: settled}
	for i := range s.plan.Faults {
		f := &s.plan.Faults[i]
		if !s.selects(f, batch.Kind, len(settled) > 0, kinds) {
			continue
		}
		switch {
		case f.Kind == Hold:
			a.holds = append(a.holds, s.holds[f.Name])
		case f.Kind == UnlinkFail:
			if a.unlink == nil {
				a.unlink = f
			}
		case a.end == nil:
			a.end = f
		}
	}
	return a, nil
}

// selects reports whether f selects the commit just counted, which settles
// tasks of kinds (when the plan asks). s.mu is held.
func (s *Storage) selects(f *Fault, kind storage.BatchKind, settles bool, kinds []string) bool {
	switch {
	case f.Batch != "" && f.Batch != kind:
		return false
	case f.Settles != "":
		return slices.Contains(kinds, f.Settles) && s.byKind[f.Settles] == f.Commit
	case f.Kind == UnlinkFail:
		return settles && s.settling == f.Commit
	case f.Batch == "":
		return s.commits == f.Commit
	}
	return s.byBatch[f.Batch] == f.Commit
}

func settledTasks(batch storage.CommitBatch) []storage.ID {
	var ids []storage.ID
	for _, w := range batch.Writes {
		if w.Type == storage.WriteSettle {
			ids = append(ids, w.ID)
		}
	}
	return ids
}

// pause fires a hold and waits for its release.
func (s *Storage) pause(ctx context.Context, a *admission, h *hold) error {
	s.mu.Lock()
	f := a.firing(h.fault, false, nil)
	h.firing = &f
	s.log(f)
	s.mu.Unlock()
	h.held.Set()
	if err := h.release.Wait(context.WithoutCancel(ctx)); err != nil {
		panic("fault: a hold's wait, which ignores cancellation, failed: " + err.Error())
	}
	// The handle may have died (Reopen) while the commit was held: the
	// commit belongs to the dead process and is never persisted.
	return s.usable()
}

// finish applies the fail, uncertain or crash fault that hits the commit.
func (s *Storage) finish(ctx context.Context, a *admission, batch storage.CommitBatch) (storage.Range, error) {
	f := *a.end
	e := &Error{Fault: f, Commit: a.ordinal}
	switch f.Kind {
	case Fail:
		if f.Tear != 0 {
			w := s.failWrite(ctx, f, batch)
			if !w.hit { // the store wrote nothing: it refused the batch, or it had no writes
				s.missed(a, f, w.err == nil)
				return w.r, w.err
			}
			s.mu.Lock()
			fired := a.firing(f, w.err == nil, nil)
			fired.Torn, fired.Broken = w.torn, w.broken
			s.log(fired)
			s.mu.Unlock()
			if w.err == nil {
				return w.r, nil // the store said it kept the batch; Broken says it should not have
			}
			// ErrDiskFull, not the store's error, which names the file
			// (where the session lives: not in a trace).
			e.Err = ErrDiskFull
			return storage.Range{}, e
		}
		e.Err = ErrInjected
		s.fire(a, f, false, nil)
	case Uncertain:
		if _, err := s.inner.Commit(ctx, batch); err != nil {
			// The store rejected the batch: nothing was written, so the
			// outcome is certain and the rejection is the answer.
			s.missed(a, f, false)
			return storage.Range{}, err
		}
		e.Err = ErrUncertain
		s.mu.Lock()
		s.uncertain = e
		s.mu.Unlock()
		s.fire(a, f, true, nil)
	case Crash:
		persisted := false
		var torn *TornLine
		switch {
		case f.Tear != 0:
			var err error
			if torn, err = s.tear(ctx, f, batch); err != nil {
				s.shapeFailed(err)
			}
		case f.Persist:
			// A rejected batch was not written; the process dies all the same.
			_, err := s.inner.Commit(ctx, batch)
			persisted = err == nil
		}
		e.Err = ErrCrashed
		s.mu.Lock()
		fired := a.firing(f, persisted, nil)
		fired.Torn = torn
		s.log(fired)
		s.mu.Unlock()
		s.die(e, a.firstSeq-1)
	default:
		panic(fmt.Sprintf("fault: %s chosen to end a commit; only fail, uncertain and crash do", f))
	}
	return storage.Range{}, e
}

func (s *Storage) fire(a *admission, f Fault, persisted bool, tasks []storage.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log(a.firing(f, persisted, tasks))
}

// missed records f, which the store's own answer to the commit left
// without effect.
func (s *Storage) missed(a *admission, f Fault, persisted bool) {
	fired := a.firing(f, persisted, nil)
	fired.Missed = true
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log(fired)
}

func (a *admission) firing(f Fault, persisted bool, tasks []storage.ID) Firing {
	return Firing{Name: f.Name, Kind: f.Kind, Event: EventFire, Commit: a.ordinal, Batch: a.batch,
		FirstSeq: a.firstSeq, Persisted: persisted, Tasks: tasks}
}
