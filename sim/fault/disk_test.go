package fault_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
	"github.com/pico-go/pico/storage/sqlite"
)

// restart is the restarted process over a disk handle: the files are
// opened again and a new line runs over the new handle.
func (p *process) restart(ctx context.Context, plan fault.Plan) *process {
	return newProcess(p.s, nil, must(p.store.Restart(ctx, plan)))
}

// simulateDisk is simulate over the files of disk: body's process has no
// inner memory store, only its handle (restart replaces it). body closes
// the last process's store.
func simulateDisk(t *testing.T, seed uint64, disk fault.Disk, plan fault.Plan, body func(ctx context.Context, p *process)) *sim.Trace {
	t.Helper()
	trace := sim.NewTrace(nil, true)
	s := sim.New(sim.Options{Seed: seed, Trace: trace})
	err := s.Run(context.Background(), func(ctx context.Context) {
		store := must(fault.WrapDisk(ctx, s.Runtime(), disk, plan, s))
		body(ctx, newProcess(s, nil, store))
	})
	if err != nil {
		t.Fatalf("seed %d, plan %s: %v", seed, plan, err)
	}
	return trace
}

func jsonlSession(t *testing.T) (string, fault.Disk) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	return path, fault.JSONL(path, jsonl.Options{})
}

func readFile(path string) []byte { return must(os.ReadFile(path)) }

// tornFiring returns the handle's only firing, which must be a torn crash.
func tornFiring(t *testing.T, store *fault.Storage) fault.Firing {
	t.Helper()
	fired := store.Fired()
	if len(fired) != 1 || fired[0].Kind != fault.Crash || fired[0].Persisted || fired[0].Torn == nil {
		t.Fatalf("firings = %+v; want one unpersisted crash that tore a line", fired)
	}
	return fired[0]
}

// checkTornOnDisk checks what a torn crash left: the file ends inside the
// batch's line, with no newline, after exactly the kept bytes.
func checkTornOnDisk(t *testing.T, path string, torn *fault.TornLine) {
	t.Helper()
	data := readFile(path)
	switch {
	case torn.Kept < 1 || torn.Kept > torn.Line-1:
		t.Errorf("kept %d of a %d-byte line; want 1 to %d", torn.Kept, torn.Line, torn.Line-1)
	case int64(len(data)) != torn.Offset+int64(torn.Kept):
		t.Errorf("%s holds %d bytes after the crash; want the line's offset %d plus %d kept", torn.File, len(data), torn.Offset, torn.Kept)
	case bytes.IndexByte(data[torn.Offset:], '\n') >= 0:
		t.Errorf("%s: the torn line %q has a newline", torn.File, data[torn.Offset:])
	case torn.Offset > 0 && data[torn.Offset-1] != '\n':
		t.Errorf("%s: the torn line does not start after a complete line", torn.File)
	}
}

func TestTornJSONLLineIsDiscardedOnRestartAndTheNextWriteReusesItsIDs(t *testing.T) {
	const tearSeeds = 20
	kept := map[int]bool{}
	for tear := uint32(1); tear <= tearSeeds; tear++ {
		path, disk := jsonlSession(t)
		plan := fault.Plan{Faults: []fault.Fault{{Name: "mid-write", Kind: fault.Crash, Commit: 3, Tear: tear}}}
		simulateDisk(t, 1, disk, plan, func(ctx context.Context, p *process) {
			conv := p.conversation(ctx)     // commit 1: id 1
			must2(p.say(ctx, conv, "kept")) // commit 2: ids 2, 3
			before := look(ctx, p.store, conv)
			size := int64(len(readFile(path)))
			lost, _, err := p.say(ctx, conv, "torn") // commit 3: ids 4, 5, torn
			if !errors.Is(err, fault.ErrCrashed) {
				t.Fatalf("tear %d: crashing commit = %v; want ErrCrashed", tear, err)
			}
			f := tornFiring(t, p.store)
			if f.Torn.File != "s.jsonl" || f.Torn.Offset != size || f.FirstSeq != 4 {
				t.Fatalf("tear %d: firing %+v, torn %+v; want the main file cut after its %d bytes, firstSeq 4", tear, f, *f.Torn, size)
			}
			checkTornOnDisk(t, path, f.Torn)
			kept[f.Torn.Kept] = true

			q := p.restart(ctx, fault.Plan{})
			if diff := cmp.Diff(before, look(ctx, q.store, conv)); diff != "" {
				t.Fatalf("tear %d: restarted state (-before the torn batch +after restart):\n%s", tear, diff)
			}
			if data := readFile(path); int64(len(data)) != size {
				t.Fatalf("tear %d: after restart the main file has %d bytes; want the torn line cut back to %d", tear, len(data), size)
			}
			again, r, err := q.say(ctx, conv, "again")
			if err != nil || again != lost || r != (storage.Range{First: 4, Last: 5}) {
				t.Fatalf("tear %d: next commit = entry %d, %+v, %v; want entry %d (the torn batch's id), {4 5}", tear, again, r, err, lost)
			}
			must(0, q.store.Close(ctx))
		})
	}
	if len(kept) < tearSeeds/4 {
		t.Fatalf("%d tear seeds cut at only %d offsets; the seed does not move the cut", tearSeeds, len(kept))
	}
}

func TestTornScratchLineIsDiscardedOnRestart(t *testing.T) {
	path, disk := jsonlSession(t)
	plan := fault.Plan{Faults: []fault.Fault{{Name: "mid-frame", Kind: fault.Crash, Commit: 2, Batch: storage.BatchScratch, Tear: 3}}}
	simulateDisk(t, 1, disk, plan, func(ctx context.Context, p *process) {
		task := p.liveTask(ctx)
		p.scratch(ctx, task, "first") // scratch commit 1
		_, err := p.line.Scratch(ctx, task, func(sc core.ScratchTx) error { sc.SetValue(note.Address, "second"); return nil })
		if !errors.Is(err, fault.ErrCrashed) {
			t.Fatalf("crashing scratch commit = %v; want ErrCrashed", err)
		}
		f := tornFiring(t, p.store)
		if want := fmt.Sprintf("s.scratch/%d", task); f.Torn.File != want || f.Batch != storage.BatchScratch {
			t.Fatalf("torn %+v of a %s batch; want %s torn", *f.Torn, f.Batch, want)
		}
		checkTornOnDisk(t, filepath.Join(filepath.Dir(path), f.Torn.File), f.Torn)

		q := p.restart(ctx, fault.Plan{})
		if got := q.noteOf(ctx, task); got != "first" {
			t.Fatalf("scratch after restart = %q; want %q (the torn frame is discarded)", got, "first")
		}
		if r := q.scratch(ctx, task, "again"); r.First != f.FirstSeq {
			t.Fatalf("next scratch commit at %d; want %d, the torn batch's id", r.First, f.FirstSeq)
		}
		must(0, q.store.Close(ctx))
	})
}

// A task's first scratch batch is written with its file's header in one
// write, so a crash in it can cut the header too. Over tear seeds the cut
// lands in the header and in the batch; either way restart finds the task
// without scratch (open drops the torn file or the torn line), and the
// next scratch commit reuses the torn batch's sequence.
func TestTornFirstScratchWriteMayCutTheHeader(t *testing.T) {
	inHeader, inBatch := 0, 0
	for tear := uint32(1); tear <= 24; tear++ {
		path, disk := jsonlSession(t)
		plan := fault.Plan{Faults: []fault.Fault{{Name: "first-frame", Kind: fault.Crash, Commit: 1, Batch: storage.BatchScratch, Tear: tear}}}
		simulateDisk(t, 1, disk, plan, func(ctx context.Context, p *process) {
			task := p.liveTask(ctx)
			_, err := p.line.Scratch(ctx, task, func(sc core.ScratchTx) error { sc.SetValue(note.Address, "first"); return nil })
			if !errors.Is(err, fault.ErrCrashed) {
				t.Fatalf("tear %d: crashing scratch commit = %v; want ErrCrashed", tear, err)
			}
			f := tornFiring(t, p.store)
			file := filepath.Join(filepath.Dir(path), f.Torn.File)
			header := fmt.Sprintf(`{"pico":"scratch","format":%d,"task":%d}`+"\n", jsonl.FormatVersion, task)
			data := readFile(file)
			if f.Torn.Offset != 0 || len(data) != f.Torn.Kept || f.Torn.Kept < 1 || f.Torn.Kept >= f.Torn.Line || !strings.HasPrefix(header+"{", string(data[:min(len(data), len(header)+1)])) {
				t.Fatalf("tear %d: torn %+v left %q; want a cut inside the file's one write, from 0", tear, *f.Torn, data)
			}
			if f.Torn.Kept < len(header) {
				inHeader++
			} else {
				inBatch++
			}
			q := p.restart(ctx, fault.Plan{})
			if got := q.noteOf(ctx, task); got != "" {
				t.Fatalf("tear %d: scratch after restart = %q; want none (the torn first batch is discarded)", tear, got)
			}
			if r := q.scratch(ctx, task, "again"); r.First != f.FirstSeq {
				t.Fatalf("tear %d: next scratch commit at %d; want %d, the torn batch's id", tear, r.First, f.FirstSeq)
			}
			must(0, q.store.Close(ctx))
		})
	}
	if inHeader == 0 || inBatch == 0 {
		t.Fatalf("the tears cut %d times in the header and %d in the batch; want both", inHeader, inBatch)
	}
}

// A settle that tears died before the unlink that follows it: the task is
// live again on restart, and the scratch the commit had already removed is
// back, with its sequences.
func TestTornSettleLeavesTheTaskLiveWithItsScratch(t *testing.T) {
	path, disk := jsonlSession(t)
	plan := fault.Plan{Faults: []fault.Fault{{Name: "mid-settle", Kind: fault.Crash, Commit: 3, Batch: storage.BatchMain, Tear: 9}}}
	simulateDisk(t, 1, disk, plan, func(ctx context.Context, p *process) {
		task := p.liveTask(ctx)                      // main commits 1, 2: ids 1, 2
		last := p.scratch(ctx, task, "working").Last // scratch: id 3
		scratchFile := filepath.Join(filepath.Dir(path), "s.scratch", task.String())
		saved := readFile(scratchFile)
		_, err := p.line.Commit(ctx, func(tx *core.Tx) error { tx.Settle(task, "exited", nil); return nil })
		if !errors.Is(err, fault.ErrCrashed) {
			t.Fatalf("crashing settle = %v; want ErrCrashed", err)
		}
		if f := tornFiring(t, p.store); f.Torn.File != "s.jsonl" {
			t.Fatalf("torn %+v; want the main file", *f.Torn)
		}
		if got := readFile(scratchFile); !bytes.Equal(got, saved) {
			t.Fatalf("scratch file after the torn settle = %q; want it as before (%q): the process died before the unlink", got, saved)
		}
		q := p.restart(ctx, fault.Plan{})
		tasks := must(q.store.GetTasks(ctx, []ID{task}))
		if tk := tasks[task]; tk == nil || !tk.Live() || tk.Status != "planned" {
			t.Fatalf("task after restart = %+v; want it live, planned", tk)
		}
		if got, seq := q.noteOf(ctx, task), q.store.LastSeq(); got != "working" || seq != last {
			t.Fatalf("after restart scratch = %q, lastSeq %d; want %q, %d", got, seq, "working", last)
		}
		if r := must(q.line.Commit(ctx, func(tx *core.Tx) error { tx.Settle(task, "exited", nil); return nil })); r.First != last+1 {
			t.Fatalf("settle after restart at %d; want %d", r.First, last+1)
		}
		must(0, q.store.Close(ctx))
	})
}

func TestCrashAfterACommittedJSONLBatchKeepsIt(t *testing.T) {
	path, disk := jsonlSession(t)
	plan := fault.Plan{Faults: []fault.Fault{{Name: "after-write", Kind: fault.Crash, Commit: 3, Persist: true}}}
	simulateDisk(t, 1, disk, plan, func(ctx context.Context, p *process) {
		conv := p.conversation(ctx)
		must2(p.say(ctx, conv, "kept"))
		id, _, err := p.say(ctx, conv, "at the crash")
		if !errors.Is(err, fault.ErrCrashed) {
			t.Fatalf("crashing commit = %v; want ErrCrashed", err)
		}
		if f := p.store.Fired(); len(f) != 1 || !f[0].Persisted || f[0].Torn != nil {
			t.Fatalf("firings = %+v; want one persisted crash, nothing torn", f)
		}
		if data := readFile(path); !bytes.HasSuffix(data, []byte("\n")) || bytes.Count(data, []byte("\n")) != 4 {
			t.Fatalf("main file after the crash:\n%s\nwant the header and three complete lines", data)
		}
		q := p.restart(ctx, fault.Plan{})
		want := view{LastSeq: 5, Transcript: []ID{3, id}, Entries: []ID{3, id}, Mode: "at the crash", Context: []ID{3, id}}
		if diff := cmp.Diff(want, look(ctx, q.store, conv)); diff != "" {
			t.Fatalf("restarted state (-want +got):\n%s", diff)
		}
		if next, _, err := q.say(ctx, conv, "after"); err != nil || next != 7 {
			t.Fatalf("first entry after restart = %d, %v; want 7", next, err)
		}
		must(0, q.store.Close(ctx))
	})
}

// SQLite has no torn state: a crash lands before the transaction commits
// (nothing of the batch) or after it (all of it).
func TestSQLiteCrashIsBeforeOrAfterTheTransaction(t *testing.T) {
	for _, persist := range []bool{false, true} {
		t.Run(fmt.Sprintf("persist=%v", persist), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			disk := fault.Disk{Open: func(ctx context.Context) (storage.Storage, error) {
				s, err := sqlite.Open(ctx, path, sqlite.Options{Session: "s"})
				if err != nil {
					return nil, err
				}
				return s, nil
			}}
			plan := fault.Plan{Faults: []fault.Fault{{Name: "power-cut", Kind: fault.Crash, Commit: 3, Persist: persist}}}
			simulateDisk(t, 1, disk, plan, func(ctx context.Context, p *process) {
				conv := p.conversation(ctx)
				must2(p.say(ctx, conv, "kept"))
				before := look(ctx, p.store, conv)
				id, _, err := p.say(ctx, conv, "at the crash")
				if !errors.Is(err, fault.ErrCrashed) {
					t.Fatalf("crashing commit = %v; want ErrCrashed", err)
				}
				q := p.restart(ctx, fault.Plan{})
				want := before
				if persist {
					want = view{LastSeq: 5, Transcript: []ID{3, id}, Entries: []ID{3, id}, Mode: "at the crash", Context: []ID{3, id}}
				}
				if diff := cmp.Diff(want, look(ctx, q.store, conv)); diff != "" {
					t.Fatalf("restarted state (-want +got):\n%s", diff)
				}
				if next, _, err := q.say(ctx, conv, "after"); err != nil || next != want.LastSeq+2 {
					t.Fatalf("first entry after restart = %d, %v; want %d", next, err, want.LastSeq+2)
				}
				must(0, q.store.Close(ctx))
			})
		})
	}
}

func TestRestartAfterCloseOrWithoutCrashReopensTheFiles(t *testing.T) {
	_, disk := jsonlSession(t)
	simulateDisk(t, 1, disk, fault.Plan{}, func(ctx context.Context, p *process) {
		conv := p.conversation(ctx)
		must2(p.say(ctx, conv, "one"))
		must(0, p.store.Close(ctx)) // closes the files
		q := p.restart(ctx, fault.Plan{})
		must2(q.say(ctx, conv, "two"))
		want := look(ctx, q.store, conv)
		r := q.restart(ctx, fault.Plan{}) // a kill without a fault: the live handle dies
		if _, err := q.store.GetEntries(ctx, []ID{1}); !errors.Is(err, fault.ErrCrashed) {
			t.Errorf("read on the replaced handle = %v; want ErrCrashed", err)
		}
		if diff := cmp.Diff(want, look(ctx, r.store, conv)); diff != "" {
			t.Errorf("restarted state (-want +got):\n%s", diff)
		}
		must(0, r.store.Close(ctx))
	})
}

func TestRestartOfAMemoryHandleIsReopen(t *testing.T) {
	simulate(t, 1, fault.Plan{}, func(ctx context.Context, p *process) {
		conv := p.conversation(ctx)
		q := must(p.store.Restart(ctx, fault.Plan{}))
		if got := look(ctx, q, conv); got.LastSeq != 1 {
			t.Errorf("restarted memory handle: lastSeq %d; want 1", got.LastSeq)
		}
		if _, err := p.store.GetEntries(ctx, []ID{1}); !errors.Is(err, fault.ErrCrashed) {
			t.Errorf("read on the replaced handle = %v; want ErrCrashed", err)
		}
	})
}

// A torn crash is in the trace with where it cut, named relative to the
// session, so the same seed and plan give the same trace in any directory.
func TestTornCrashIsWrittenToTheSimTrace(t *testing.T) {
	plan := fault.Plan{Faults: []fault.Fault{{Name: "mid-write", Kind: fault.Crash, Commit: 2, Tear: 5}}}
	run := func() *sim.Trace {
		_, disk := jsonlSession(t)
		return simulateDisk(t, 2, disk, plan, func(ctx context.Context, p *process) {
			conv := p.conversation(ctx)
			if _, _, err := p.say(ctx, conv, "torn"); !errors.Is(err, fault.ErrCrashed) {
				panic(err)
			}
			must(0, p.restart(ctx, fault.Plan{}).store.Close(ctx))
		})
	}
	trace := run()
	var got []traceFault
	for _, line := range trace.Lines() {
		if strings.HasPrefix(line, `{"k":"fault"`) {
			var f traceFault
			must(0, json.Unmarshal([]byte(line), &f))
			got = append(got, f)
		}
	}
	if len(got) != 1 || got[0].Detail.Torn == nil || got[0].Detail.Torn.File != "s.jsonl" || got[0].Detail.Torn.Offset == 0 {
		t.Fatalf("fault events in the trace = %+v; want the torn crash with where it cut the main file", got)
	}
	if again := run(); again.Digest() != trace.Digest() {
		t.Fatal("the same seed and plan gave a different trace in another directory")
	}
}

func TestTearPlansAreValidatedAndRoundTrip(t *testing.T) {
	plan := fault.Plan{Faults: []fault.Fault{{Name: "c", Kind: fault.Crash, Commit: 2, Tear: 7}}}
	const canonical = `{"faults":[{"name":"c","kind":"crash","commit":2,"tear":7}]}`
	if got := plan.String(); got != canonical {
		t.Fatalf("plan.String() = %s; want %s", got, canonical)
	}
	if back, err := fault.ParsePlan([]byte(canonical)); err != nil || !cmp.Equal(plan, back) {
		t.Fatalf("ParsePlan(%s) = %+v, %v", canonical, back, err)
	}
	if got, want := plan.Faults[0].String(), `crash "c" at commit 2 (torn, seed 7)`; got != want {
		t.Fatalf("String() = %s; want %s", got, want)
	}
	const full = `{"faults":[{"name":"f","kind":"fail","commit":3,"batch":"scratch","tear":9}]}`
	if back, err := fault.ParsePlan([]byte(full)); err != nil || back.String() != full {
		t.Fatalf("ParsePlan(%s) = %v, %v", full, back, err)
	} else if got, want := back.Faults[0].String(), `fail "f" at scratch commit 3 (the disk fills, seed 9)`; got != want {
		t.Fatalf("String() = %s; want %s", got, want)
	}
	for name, input := range map[string]string{
		"tear on uncertain": `{"faults":[{"name":"a","kind":"uncertain","commit":1,"tear":3}]}`,
		"tear and persist":  `{"faults":[{"name":"a","kind":"crash","commit":1,"persist":true,"tear":3}]}`,
	} {
		var pe *fault.PlanError
		if _, err := fault.ParsePlan([]byte(input)); !errors.As(err, &pe) || pe.Field != "tear" {
			t.Errorf("%s: ParsePlan = %v; want a PlanError on faults[0].tear", name, err)
		}
	}
}

func TestDiskProgrammerErrorsPanicNamingTheRule(t *testing.T) {
	expectPanic := func(t *testing.T, want string, fn func()) {
		t.Helper()
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), want) {
				t.Fatalf("panic = %v; want one mentioning %q", r, want)
			}
		}()
		fn()
	}
	ctx, rt := context.Background(), core.RealRuntime()
	tearing := fault.Plan{Faults: []fault.Fault{{Name: "c", Kind: fault.Crash, Commit: 1, Tear: 1}}}
	t.Run("tear over memory", func(t *testing.T) {
		expectPanic(t, "nothing to tear", func() { fault.Wrap(rt, memory.New(), tearing, nil) })
	})
	t.Run("tear over a disk without files", func(t *testing.T) {
		disk := fault.Disk{Open: func(context.Context) (storage.Storage, error) { return memory.New(), nil }}
		expectPanic(t, "names no files", func() { _, _ = fault.WrapDisk(ctx, rt, disk, tearing, nil) })
	})
	t.Run("fail a write over a disk that cannot", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		disk := fault.Disk{Open: func(ctx context.Context) (storage.Storage, error) { return jsonl.Open(ctx, path, jsonl.Options{}) }, Files: []string{path}}
		full := fault.Plan{Faults: []fault.Fault{{Name: "f", Kind: fault.Fail, Commit: 1, Tear: 1}}}
		expectPanic(t, "cannot be failed", func() { _, _ = fault.WrapDisk(ctx, rt, disk, full, nil) })
	})
	t.Run("reopen of a disk handle", func(t *testing.T) {
		_, disk := jsonlSession(t)
		s := must(fault.WrapDisk(ctx, rt, disk, fault.Plan{}, nil))
		defer s.Close(ctx)
		expectPanic(t, "use Restart", func() { s.Reopen(fault.Plan{}) })
	})
	t.Run("restart twice", func(t *testing.T) {
		_, disk := jsonlSession(t)
		s := must(fault.WrapDisk(ctx, rt, disk, fault.Plan{}, nil))
		next := must(s.Restart(ctx, fault.Plan{}))
		defer next.Close(ctx)
		expectPanic(t, "twice", func() { _, _ = s.Restart(ctx, fault.Plan{}) })
	})
}

func TestWrapDiskReturnsTheOpenError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte("{oops}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := fault.WrapDisk(context.Background(), core.RealRuntime(), fault.JSONL(path, jsonl.Options{}), fault.Plan{}, nil)
	var fe *jsonl.FileError
	if !errors.As(err, &fe) || fe.Line != 1 {
		t.Fatalf("WrapDisk over a malformed file = %v; want the jsonl.FileError naming line 1", err)
	}
}

// liveTask commits a conversation and a planned job task in it.
func (p *process) liveTask(ctx context.Context) ID {
	conv := p.conversation(ctx)
	var task ID
	must(p.line.Commit(ctx, func(tx *core.Tx) error {
		task = tx.Task(jobKind, core.TaskSpec{ConversationID: conv})
		return nil
	}))
	return task
}

// scratch sets the task's scratch note to v.
func (p *process) scratch(ctx context.Context, task ID, v string) storage.Range {
	return must(p.line.Scratch(ctx, task, func(sc core.ScratchTx) error { sc.SetValue(note.Address, v); return nil }))
}

// noteOf reads the task's scratch note.
func (p *process) noteOf(ctx context.Context, task ID) string {
	ver, ok := must2(p.store.GetValue(ctx, note.In(task).Address, 0))
	if !ok {
		return ""
	}
	var v string
	must(0, json.Unmarshal(ver.Value, &v))
	return v
}

// On files an unlinkFail is real: the retired scratch stays on disk after
// the settle, invisible, and the next open ignores it (and finishes the
// unlink).
func TestUnlinkFailOnDiskLeavesTheRetiredScratchFile(t *testing.T) {
	path, disk := jsonlSession(t)
	plan := fault.Plan{Faults: []fault.Fault{{Name: "stuck-unlink", Kind: fault.UnlinkFail, Commit: 1}}}
	simulateDisk(t, 1, disk, plan, func(ctx context.Context, p *process) {
		task := p.liveTask(ctx)
		p.scratch(ctx, task, "working")
		scratchFile := filepath.Join(filepath.Dir(path), "s.scratch", task.String())
		saved := readFile(scratchFile)
		r := must(p.line.Commit(ctx, func(tx *core.Tx) error { tx.Settle(task, "exited", nil); return nil }))
		if got := p.store.UnlinkFailures(); len(got) != 1 || got[0].FirstSeq != r.First {
			t.Fatalf("unlink failures = %+v; want the settle at %d", got, r.First)
		}
		if got, err := os.ReadFile(scratchFile); err != nil || !bytes.Equal(got, saved) {
			t.Fatalf("retired scratch file after the failed unlink = %q, %v; want it left as it was", got, err)
		}
		if got := p.noteOf(ctx, task); got != "" {
			t.Fatalf("retired scratch visible: %q", got)
		}
		q := p.restart(ctx, fault.Plan{})
		if got, seq := q.noteOf(ctx, task), q.store.LastSeq(); got != "" || seq != r.Last {
			t.Fatalf("after restart scratch = %q, lastSeq %d; want nothing, %d (the settle covers the retired sequences)", got, seq, r.Last)
		}
		if _, err := os.Stat(scratchFile); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("retired scratch file after the reopen: %v; want the open to finish the unlink", err)
		}
		must(0, q.store.Close(ctx))
	})
}

// A fail with Tear fills the disk while JSONL writes the batch's line, in
// the main file or a task's scratch: the store cuts the prefix back and
// keeps nothing, which the handle checks (no Broken), the firing says
// where the write stopped, and the session goes on as before the commit.
func TestAFullDiskMidLineKeepsNothing(t *testing.T) {
	for _, batch := range []storage.BatchKind{storage.BatchMain, storage.BatchScratch} {
		t.Run(string(batch), func(t *testing.T) {
			kept := map[int]bool{}
			for tear := uint32(1); tear <= 12; tear++ {
				path, disk := jsonlSession(t)
				plan := fault.Plan{Faults: []fault.Fault{{Name: "full", Kind: fault.Fail, Commit: 3, Batch: batch, Tear: tear}}}
				if batch == storage.BatchScratch {
					plan.Faults[0].Commit = 2
				}
				simulateDisk(t, 1, disk, plan, func(ctx context.Context, p *process) {
					task := p.liveTask(ctx)       // main commits 1 and 2
					p.scratch(ctx, task, "first") // scratch commit 1
					size, last := len(readFile(path)), p.store.LastSeq()
					var err error
					if batch == storage.BatchScratch {
						_, err = p.line.Scratch(ctx, task, func(sc core.ScratchTx) error { sc.SetValue(note.Address, "second"); return nil })
					} else {
						_, err = p.line.Commit(ctx, func(tx *core.Tx) error { tx.Patch(task, core.TaskPatch{State: map[string]int{"n": 1}}); return nil })
					}
					if !errors.Is(err, fault.ErrDiskFull) {
						t.Fatalf("tear %d: commit on a full disk = %v; want ErrDiskFull", tear, err)
					}
					fired := p.store.Fired()
					if len(fired) != 1 || fired[0].Torn == nil || fired[0].Broken != "" || fired[0].Persisted {
						t.Fatalf("tear %d: firings %+v; want one, torn, not persisted, nothing broken", tear, fired)
					}
					torn := fired[0].Torn
					want := "s.jsonl"
					if batch == storage.BatchScratch {
						want = fmt.Sprintf("s.scratch/%d", task)
					}
					if torn.File != want || torn.Kept < 1 || torn.Kept >= torn.Line {
						t.Fatalf("tear %d: torn %+v; want %s, a prefix of its line", tear, *torn, want)
					}
					kept[torn.Kept] = true
					if len(readFile(path)) != size || p.store.LastSeq() != last || p.noteOf(ctx, task) != "first" {
						t.Fatalf("tear %d: the failed commit left something: main file %d bytes (was %d), lastSeq %d (was %d), note %q",
							tear, len(readFile(path)), size, p.store.LastSeq(), last, p.noteOf(ctx, task))
					}
					must(0, p.store.Close(ctx))
				})
			}
			if len(kept) < 4 {
				t.Fatalf("12 tear seeds stopped the write at only %d offsets; the seed does not move it", len(kept))
			}
		})
	}
}

// Over SQLite (CommitGated) a fail with Tear fills the disk at the
// transaction's COMMIT: the store rolls back, keeps nothing (no Broken),
// and the session reads and commits on as before it.
func TestAFullDiskAtASQLiteCommitKeepsNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	disk := fault.CommitGated(func(ctx context.Context, fail func() error) (storage.Storage, error) {
		s, err := sqlite.Open(ctx, path, sqlite.Options{Session: "s", CommitFault: fail})
		if err != nil {
			return nil, err
		}
		return s, nil
	})
	plan := fault.Plan{Faults: []fault.Fault{{Name: "full", Kind: fault.Fail, Commit: 3, Tear: 4}}}
	simulateDisk(t, 1, disk, plan, func(ctx context.Context, p *process) {
		conv := p.conversation(ctx)
		must2(p.say(ctx, conv, "kept"))
		before := look(ctx, p.store, conv)
		if _, _, err := p.say(ctx, conv, "on a full disk"); !errors.Is(err, fault.ErrDiskFull) {
			t.Fatalf("commit on a full disk = %v; want ErrDiskFull", err)
		}
		if fired := p.store.Fired(); len(fired) != 1 || fired[0].Torn != nil || fired[0].Broken != "" || fired[0].Persisted {
			t.Fatalf("firings %+v; want one, no line torn, nothing broken, not persisted", fired)
		}
		if diff := cmp.Diff(before, look(ctx, p.store, conv)); diff != "" {
			t.Fatalf("after the failed commit (-before +after):\n%s", diff)
		}
		q := p.restart(ctx, fault.Plan{})
		if next, _, err := q.say(ctx, conv, "after"); err != nil || next != before.LastSeq+2 {
			t.Fatalf("first entry after restart = %d, %v; want %d", next, err, before.LastSeq+2)
		}
		must(0, q.store.Close(ctx))
	})
}
