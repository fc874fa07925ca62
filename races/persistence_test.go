package races

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/storage"
)

var (
	modeValue = storage.ConversationValue[string]("race.mode", storage.Rewind)
	notesList = storage.ConversationList[string]("race.notes", storage.Sticky)
)

// pausedHold is the barrier of the row: it holds the third commit (after the
// two that set the old state up) between construction and persistence.
const pausedHold = "paused"

var pausedPlan = fault.Plan{Faults: []fault.Fault{{Name: pausedHold, Kind: fault.Hold, Commit: 3}}}

// pausedSeeds is how many seeds the row runs: every run opens a JSONL
// session and a SQLite database (about 20 ms of file work per run), so the
// full sweep would take most of the package's time budget; the forced
// order fixes the three points that matter, and the seeds only vary the
// fallback scheduling of the steps around them.
const pausedSeeds = 50

// persistencePaused is the row "Persistence paused after construction",
// run on every backend in turn (memory, JSONL in a temporary directory,
// SQLite in a temporary file) within one cell, so the forced order repeats
// once per backend. A writer commits through the line over a handle whose
// plan holds that commit after construction; a releaser ends the hold; a
// reader reads the conversation through every query (point and batched
// entry reads, the transcript scan, a value, a list, lastSeq and a derived
// context).
//
// forward: the reader reads, completely, while the commit is held, and sees
// exactly the state before it. reverse: the hold is released and the commit
// returns before the reader reads, and the reader sees the whole batch.
// Either way the writer's Commit returns only after the release, with the
// range of the whole batch.
func persistencePaused(o order) cell {
	once := map[order][]string{
		forward: {"reader:read", "reader:read-done", "releaser:release", "writer:committed"},
		reverse: {"releaser:release", "writer:committed", "reader:read", "reader:read-done"},
	}[o]
	var points []string
	for range backends {
		points = append(points, once...)
	}
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		runs := make([]pausedRun, len(backends))
		var setupErr error
		main := func(ctx context.Context) {
			dir, err := os.MkdirTemp("", "pico-races-")
			if err != nil {
				setupErr = err
				return
			}
			defer os.RemoveAll(dir)
			for i, b := range backends {
				sub := filepath.Join(dir, b.name)
				check(os.Mkdir(sub, 0o700))
				inner, err := b.open(ctx, sub)
				check(err)
				runs[i].run(ctx, s, inner)
				check(inner.Close(ctx))
			}
		}
		verify := func() error {
			if setupErr != nil {
				return setupErr
			}
			for i, b := range backends {
				if err := runs[i].verify(o); err != nil {
					return fmt.Errorf("%s: %w", b.name, err)
				}
			}
			return nil
		}
		return main, verify
	}}
}

// pausedRun is what the row observed on one backend.
type pausedRun struct {
	before, during, after      snapshot
	got                        storage.Range
	commitErr                  error
	released, releasedAtReturn bool
	fired                      []fault.Firing
}

func (p *pausedRun) run(ctx context.Context, s *sim.Sim, inner storage.Storage) {
	rt := s.Runtime()
	store := fault.Wrap(rt, inner, pausedPlan, s)
	line := core.NewLine(rt, store, core.NewKinds(), core.LineOptions{
		AfterCommit: func(_ context.Context, _ storage.CommitBatch, r storage.Range) func() {
			s.Record("commit", r)
			return nil
		},
	})
	conv := oldState(ctx, line)
	p.before = observe(ctx, store, conv)

	finished := rt.NewEvent("finished")
	left := 3
	finish := func() {
		if left--; left == 0 {
			finished.Set()
		}
	}
	rt.Go(ctx, "writer", func(ctx context.Context) {
		defer finish()
		p.got, p.commitErr = line.Commit(ctx, func(tx *core.Tx) error {
			core.TxValue(tx, modeValue.In(conv)).Set("new")
			core.AppendUser(tx, conv, ai.UserText("held", 0))
			core.TxList(tx, notesList.In(conv)).Append("held")
			return nil
		})
		p.releasedAtReturn = p.released
		sim.Yield(ctx, "committed")
	})
	rt.Go(ctx, "reader", func(ctx context.Context) {
		defer finish()
		check(store.WaitHeld(ctx, pausedHold)) // the batch is constructed and held
		sim.Yield(ctx, "read")
		p.during = observe(ctx, store, conv)
		sim.Yield(ctx, "read-done")
	})
	rt.Go(ctx, "releaser", func(ctx context.Context) {
		defer finish()
		check(store.WaitHeld(ctx, pausedHold))
		sim.Yield(ctx, "release")
		p.released = true
		store.Release(pausedHold)
	})
	check(finished.Wait(ctx))
	p.after = observe(ctx, store, conv)
	p.fired = store.Fired()
}

func (p *pausedRun) verify(o order) error {
	const heldWrites = 3
	want := storage.Range{First: p.before.LastSeq + 1, Last: p.before.LastSeq + heldWrites}
	fired := p.fired
	switch {
	case p.commitErr != nil:
		return fmt.Errorf("held commit failed: %w", p.commitErr)
	case p.got != want:
		return fmt.Errorf("held commit got range %+v; want %+v", p.got, want)
	case !p.releasedAtReturn:
		return errors.New("the held commit returned before its release")
	case len(fired) != 2 || fired[0].Event != fault.EventFire || fired[0].FirstSeq != want.First || fired[1].Event != fault.EventRelease:
		return fmt.Errorf("firings %+v; want the hold to fire at %d, then its release", fired, want.First)
	case p.after.LastSeq != want.Last || p.after.Mode != "new" || len(p.after.Transcript) != len(p.before.Transcript)+1:
		return fmt.Errorf("after the run the store holds %+v; want the whole held batch", p.after)
	}
	expect, state := p.before, "the old complete state"
	if o == reverse {
		expect, state = p.after, "the whole batch"
	}
	if diff := cmp.Diff(expect, p.during); diff != "" {
		return fmt.Errorf("the reader did not see %s (-want +seen):\n%s", state, diff)
	}
	return nil
}

// oldState commits the state the held commit builds on: a conversation, then
// one batch setting the value, appending a user entry and a list element.
func oldState(ctx context.Context, line *core.Line) storage.ID {
	var conv storage.ID
	_, err := line.Commit(ctx, func(tx *core.Tx) error {
		conv = tx.CreateConversation(core.ConversationSpec{})
		return nil
	})
	check(err)
	_, err = line.Commit(ctx, func(tx *core.Tx) error {
		core.TxValue(tx, modeValue.In(conv)).Set("old")
		core.AppendUser(tx, conv, ai.UserText("old", 0))
		core.TxList(tx, notesList.In(conv)).Append("old")
		return nil
	})
	check(err)
	return conv
}

// snapshot is what a reader sees of one conversation through every query.
type snapshot struct {
	LastSeq    storage.ID
	Found      []storage.ID // of ids 1..probeIDsMax, those GetEntries returns
	Transcript []storage.ID // ScanEntries
	Mode       string       // GetValue, current
	ModeSeq    storage.ID
	Notes      []string     // ReadList
	Context    []storage.ID // DeriveContext through lastSeq
}

// probeIDsMax bounds the ids a snapshot asks GetEntries for; it covers every
// id the row mints.
const probeIDsMax = 16

func observe(ctx context.Context, store storage.Storage, conv storage.ID) snapshot {
	snap := snapshot{LastSeq: store.LastSeq()}
	probe := make([]storage.ID, probeIDsMax)
	for i := range probe {
		probe[i] = storage.ID(i + 1)
	}
	found, err := store.GetEntries(ctx, probe)
	check(err)
	for _, id := range probe {
		if found[id] != nil {
			snap.Found = append(snap.Found, id)
		}
	}
	all := storage.Cursor{Limit: storage.PageLimitMax}
	page, err := store.ScanEntries(ctx, storage.EntryQuery{Cursor: all, ConversationID: conv})
	check(err)
	for _, e := range page.Items {
		snap.Transcript = append(snap.Transcript, e.ID)
	}
	v, ok, err := store.GetValue(ctx, modeValue.In(conv).Address, 0)
	check(err)
	if ok {
		check(json.Unmarshal(v.Value, &snap.Mode))
		snap.ModeSeq = v.Seq
	}
	elems, err := store.ReadList(ctx, notesList.In(conv).Address, storage.ListQuery{Cursor: all})
	check(err)
	for _, e := range elems.Items {
		var s string
		check(json.Unmarshal(e.Value, &s))
		snap.Notes = append(snap.Notes, s)
	}
	c, err := core.DeriveContext(ctx, store, conv, 0)
	check(err)
	snap.Context = c.IDs()
	return snap
}

// check panics on an error an actor cannot continue from; the simulator
// reports the panic with the actor's name.
func check(err error) {
	if err != nil {
		panic(err)
	}
}
