package fault

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
)

// Disk is a file-backed store as a restarted process sees it: how to open
// it from the bytes on disk, and which files hold those bytes.
type Disk struct {
	// Open opens the store from its files, as a process that starts does:
	// the backend's own recovery runs (for JSONL, the replay that discards
	// an unterminated final line).
	Open func(ctx context.Context) (storage.Storage, error)
	// Files are the files and directories (walked) that hold the store's
	// bytes. A torn crash looks among them for the file the crashing batch
	// appended its line to. Empty means the store's commits cannot tear
	// (SQLite: a transaction committed or it did not), and a plan that
	// tears is refused.
	Files []string
	// writes fails the store's writes for a fail fault with Tear (a full
	// disk): JSONL's and CommitGated's; nil when the store's writes cannot
	// be failed, and a plan with such a fault is refused.
	writes *writeGate
}

// JSONL is the Disk of the JSONL session whose main file is path: opened
// with jsonl.Open and opts, its bytes in the main file and in the scratch
// directory jsonl.Open documents (path without ".jsonl", plus ".scratch").
// A fail fault with Tear fails the store's write of its batch through
// jsonl.Options.WriteFault (asked first, then opts's own, if any).
func JSONL(path string, opts jsonl.Options) Disk {
	gate := &writeGate{}
	own := opts.WriteFault
	opts.WriteFault = func(path string, line []byte) (int, error) {
		if keep, err := gate.fault(path, line); err != nil || own == nil {
			return keep, err
		}
		return own(path, line)
	}
	return Disk{
		writes: gate,
		Open: func(ctx context.Context) (storage.Storage, error) {
			s, err := jsonl.Open(ctx, path, opts)
			if err != nil {
				return nil, err // not a typed nil in the interface
			}
			return s, nil
		},
		Files: []string{path, strings.TrimSuffix(path, ".jsonl") + ".scratch"},
	}
}

// WrapDisk opens disk and returns a handle over the store that injects
// plan's faults and records them to rec (nil records nothing). Unlike Wrap,
// the durable state is the files, not the inner store: a crash keeps only
// the bytes written (with Tear, a prefix of the crashing batch's line), and
// Restart reopens the files with disk.Open. An invalid plan, or one that
// tears while disk names no files, is a programmer error and panics; a
// failing open is returned.
func WrapDisk(ctx context.Context, rt core.Runtime, disk Disk, plan Plan, rec Recorder) (*Storage, error) {
	if err := plan.Validate(); err != nil {
		panic("fault: WrapDisk with an invalid plan: " + err.Error())
	}
	if disk.Open == nil {
		panic("fault: WrapDisk with a Disk that has no Open")
	}
	if f, ok := plan.tears(true); ok && len(disk.Files) == 0 {
		panic(fmt.Sprintf("fault: WrapDisk with a plan that tears a line (%s) over a Disk that names no files", f))
	}
	for _, f := range plan.Faults {
		if f.Kind == Fail && f.Tear != 0 && disk.writes == nil {
			panic(fmt.Sprintf("fault: WrapDisk with a plan that fails a write (%s) over a Disk whose writes cannot be failed (neither JSONL's nor CommitGated)", f))
		}
	}
	inner, err := disk.Open(ctx)
	if err != nil {
		return nil, err
	}
	return wrap(rt, inner, plan, rec, &disk), nil
}

// Restart is the restart of the handle's process, for either kind of
// handle. This handle dies as with Reopen. Over a memory store the returned
// handle reads and writes the same inner store (Reopen). Over files
// (WrapDisk) the dead process's store is closed, which writes nothing, and
// the files are opened again with the Disk's Open, so the new handle sees
// exactly what the backend recovers from the bytes on disk.
//
// Restart fails if the files cannot be opened, or if a fault of this handle
// could not shape them (a torn crash that could not cut its line, an
// unlinkFail that could not keep the retired scratch): the files are then
// not the state the plan describes. Restarting one handle twice is a programmer error and panics.
//
// Under the real runtime no call on the old handle may run concurrently
// with Restart; under the simulator none can, since no storage call yields.
func (s *Storage) Restart(ctx context.Context, plan Plan) (*Storage, error) {
	if s.disk == nil {
		return s.Reopen(plan), nil
	}
	s.replace("Restart")
	s.mu.Lock()
	diskErr := s.diskErr
	s.mu.Unlock()
	if diskErr != nil {
		return nil, diskErr
	}
	if err := s.closeInner(ctx); err != nil && !errors.Is(err, storage.ErrClosed) {
		return nil, fmt.Errorf("fault: closing the dead process's store: %w", err)
	}
	return WrapDisk(ctx, s.rt, *s.disk, plan, s.rec)
}

// closeInner closes the inner store of a disk handle once.
func (s *Storage) closeInner(ctx context.Context) error {
	s.mu.Lock()
	if s.innerClosed {
		s.mu.Unlock()
		return nil
	}
	s.innerClosed = true
	s.mu.Unlock()
	return s.inner.Close(ctx)
}
