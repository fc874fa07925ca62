package fault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"

	"github.com/pico-go/pico/storage"
)

// ErrDiskFull is the error a fail fault with Tear makes the store's write
// fail with: the disk filled while the batch's line was being written.
var ErrDiskFull = errors.New("fault: injected: no space left on device")

// writeGate is how a handle fills the disk under a store: armed with a
// seed, the store's next write fails with ErrDiskFull. A JSONL store asks
// it before each line (fault, its Options.WriteFault), and the line keeps a
// prefix drawn from the seed; a SQLite store before each COMMIT
// (commitFault, its Options.CommitFault).
type writeGate struct {
	mu   sync.Mutex
	seed uint32
	hit  bool      // the armed write happened
	torn *TornLine // what the armed line kept (JSONL)
}

func (g *writeGate) arm(seed uint32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seed, g.hit, g.torn = seed, false, nil
}

// disarm ends the gate's arming and says whether the store reached the
// write it failed, and where a line stopped.
func (g *writeGate) disarm() (bool, *TornLine) {
	g.mu.Lock()
	defer g.mu.Unlock()
	hit, torn := g.hit, g.torn
	g.seed, g.hit, g.torn = 0, false, nil
	return hit, torn
}

// fault is a JSONL store's Options.WriteFault. path is absolute; the torn
// line names it as it is (failWrite makes it relative).
func (g *writeGate) fault(path string, line []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seed == 0 {
		return 0, nil
	}
	t := &TornLine{File: path, Line: len(line)}
	if info, err := os.Stat(path); err == nil {
		t.Offset = info.Size()
	}
	if t.Line >= 2 {
		t.Kept = 1 + rand.New(rand.NewPCG(uint64(g.seed), 0)).IntN(t.Line-1)
	}
	g.seed, g.hit, g.torn = 0, true, t
	return t.Kept, ErrDiskFull
}

// commitFault is a SQLite store's Options.CommitFault.
func (g *writeGate) commitFault() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seed == 0 {
		return nil
	}
	g.seed, g.hit = 0, true
	return ErrDiskFull
}

// CommitGated is the Disk of a store that asks fail before each commit's
// COMMIT (SQLite's Options.CommitFault), which open passes it: a fail with
// Tear fills the disk there. It names no files: a transaction commits or
// it does not, so a crash never tears one.
func CommitGated(open func(ctx context.Context, fail func() error) (storage.Storage, error)) Disk {
	gate := &writeGate{}
	return Disk{writes: gate, Open: func(ctx context.Context) (storage.Storage, error) { return open(ctx, gate.commitFault) }}
}

// failedWrite is what a commit whose write failed came to: the store's
// answer, whether it reached the write (not when it refused the batch),
// where a JSONL line stopped, and what the store kept that it must not
// have ("" when nothing).
type failedWrite struct {
	r      storage.Range
	err    error
	hit    bool
	torn   *TornLine
	broken string
}

// failWrite commits the batch through the inner store with its write
// failing (a JSONL line after a prefix drawn from f.Tear), and holds the store to
// what a failed commit means, nothing of the batch kept: its last sequence
// where it was, the files as they were, and every read of the batch's
// records answering as before the commit.
func (s *Storage) failWrite(ctx context.Context, f Fault, batch storage.CommitBatch) failedWrite {
	before, serr := s.disk.snapshot(false)
	last := s.inner.LastSeq()
	seen, rerr := readsOf(ctx, s.inner, batch, last)
	s.disk.writes.arm(f.Tear)
	r, err := s.inner.Commit(ctx, batch)
	hit, torn := s.disk.writes.disarm()
	out := failedWrite{r: r, err: err, hit: hit, torn: torn}
	if !hit {
		return out
	}
	if torn != nil {
		if rel, ok := s.disk.relative(torn.File); ok {
			torn.File = rel
		}
	}
	if err == nil {
		out.broken = fmt.Sprintf("the store acknowledged batch %d–%d, whose write failed", r.First, r.Last)
		return out
	}
	if got := s.inner.LastSeq(); got != last {
		out.broken = fmt.Sprintf("the store's last sequence moved from %d to %d though its write failed", last, got)
		return out
	}
	if serr == nil {
		after, aerr := s.disk.snapshot(false)
		if aerr != nil {
			out.broken = fmt.Sprintf("the files cannot be listed after the failed write: %v", aerr)
			return out
		}
		if d := sizesDiffer(before, after); d != "" {
			out.broken = d
			return out
		}
	}
	if rerr == nil {
		now, nerr := readsOf(ctx, s.inner, batch, last)
		if nerr != nil {
			out.broken = fmt.Sprintf("reading the batch's records after the failed write: %v", nerr)
			return out
		}
		for i := range seen {
			if !reflect.DeepEqual(seen[i], now[i]) {
				out.broken = fmt.Sprintf("after the failed write, %s answers %s; before it, %s", seen[i].read, now[i].answer, seen[i].answer)
				return out
			}
		}
	}
	return out
}

// relative names path as TornLine.File does: relative to the directory of
// the Disk.Files entry it lies under, with '/' separators.
func (d *Disk) relative(path string) (string, bool) {
	for _, root := range d.Files {
		if path == root || len(path) > len(root) && path[:len(root)+1] == root+string(filepath.Separator) {
			rel, err := filepath.Rel(filepath.Dir(root), path)
			return filepath.ToSlash(rel), err == nil
		}
	}
	return "", false
}

// sizesDiffer says how the files after a failed write differ from before
// it: every file as long as it was, and none new but empty ones.
func sizesDiffer(before, after map[string]fileImage) string {
	paths := make([]string, 0, len(after))
	for p := range after {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		img, old := after[p], before[p]
		if img.size != old.size {
			return fmt.Sprintf("%s is %d bytes after a failed write; it was %d before it", img.rel, img.size, old.size)
		}
	}
	for p, old := range before {
		if _, ok := after[p]; !ok && old.size > 0 {
			return fmt.Sprintf("%s is gone after a failed write", old.rel)
		}
	}
	return ""
}

// aRead is one read of a batch's record and its answer, as JSON.
type aRead struct {
	read   string
	answer string
}

// readsOf reads what each write of the batch would change: the records
// it creates (at the sequences it would take after last), the tasks it
// patches or settles, the values and lists it writes.
func readsOf(ctx context.Context, st storage.Storage, batch storage.CommitBatch, last storage.ID) ([]aRead, error) {
	var out []aRead
	add := func(read string, v any, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", read, err)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%s: %w", read, err)
		}
		out = append(out, aRead{read: read, answer: string(raw)})
		return nil
	}
	for i, w := range batch.Writes {
		seq := last + 1 + storage.ID(i)
		var err error
		switch w.Type {
		case storage.WriteEntry:
			v, e := st.GetEntries(ctx, []storage.ID{seq})
			err = add(fmt.Sprintf("entry %d", seq), v, e)
		case storage.WriteTask:
			v, e := st.GetTasks(ctx, []storage.ID{seq})
			err = add(fmt.Sprintf("task %d", seq), v, e)
		case storage.WritePatch, storage.WriteSettle:
			v, e := st.GetTasks(ctx, []storage.ID{w.ID})
			err = add(fmt.Sprintf("task %d", w.ID), v, e)
		case storage.WriteCreateConversation:
			v, e := st.GetConversations(ctx, []storage.ID{seq})
			err = add(fmt.Sprintf("conversation %d", seq), v, e)
		case storage.WriteDeleteConversation:
			v, e := st.GetConversations(ctx, []storage.ID{w.ID})
			err = add(fmt.Sprintf("conversation %d", w.ID), v, e)
		case storage.WriteValueSet, storage.WriteValueDelete:
			v, ok, e := st.GetValue(ctx, *w.Addr, 0)
			err = add(fmt.Sprintf("value %s", w.Addr), struct {
				V  storage.Version
				OK bool
			}{v, ok}, e)
		case storage.WriteListAppend, storage.WriteListRemove, storage.WriteListClear:
			v, e := st.ReadList(ctx, *w.Addr, storage.ListQuery{})
			err = add(fmt.Sprintf("list %s", w.Addr), v, e)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
