package fault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/pico-go/pico/storage"
)

// TornLine is where a torn crash cut its batch's line.
type TornLine struct {
	// File is the torn file relative to the directory of the Disk.Files
	// entry it lies under, with '/' separators ("s.jsonl",
	// "s.scratch/12"), so that a trace does not depend on where the
	// session lives.
	File string `json:"file"`
	// Offset is where the line starts in the file. In a file the commit
	// created, which a store writes in one write (a JSONL scratch file's
	// header with its first batch), the line is the whole file, from 0.
	Offset int64 `json:"offset"`
	// Line is the line's length, newline included; Kept is how many of its
	// bytes stayed on disk, 1 to Line-1.
	Line int `json:"line"`
	Kept int `json:"kept"`
}

// fileImage is one file of a disk snapshot.
type fileImage struct {
	rel  string
	size int64
	mode fs.FileMode
	// data is the content before the crashing commit, kept to restore a
	// file the commit removed.
	data []byte
}

// tear commits the batch through the inner store and then shapes the files
// as if the process had died while writing it: the line the batch appended
// is cut after a prefix drawn from f.Tear, and a file the commit removed or
// emptied after writing (a settled task's scratch, retired after the
// settlement is written) is put back, since a process that dies mid-write
// never gets to the retirement. It returns where it cut, or nil if nothing
// was written.
//
// It snapshots the Disk's files whole before the commit, which costs the
// session's size once per torn crash: this is a simulator's fault, not a
// production path.
func (s *Storage) tear(ctx context.Context, f Fault, batch storage.CommitBatch) (*TornLine, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("fault: crash %q could not tear its batch: %s", f.Name, fmt.Sprintf(format, args...))
	}
	before, err := s.disk.snapshot(true)
	if err != nil {
		return nil, fail("%v", err)
	}
	if _, err := s.inner.Commit(ctx, batch); err != nil {
		return nil, nil // rejected: nothing was written, nothing to tear
	}
	after, err := s.disk.snapshot(false)
	if err != nil {
		return nil, fail("%v", err)
	}
	var grown []string
	for path, img := range after {
		old, had := before[path]
		switch {
		case img.size > old.size:
			grown = append(grown, path)
		case had && img.size < old.size && img.size != 0:
			return nil, fail("%s shrank from %d to %d bytes; a torn crash needs a store that appends", img.rel, old.size, img.size)
		}
	}
	slices.Sort(grown)
	gone := retired(before, after)
	var torn *TornLine
	switch len(grown) {
	case 0: // a batch without writes writes nothing
	case 1:
		_, had := before[grown[0]]
		if torn, err = cut(grown[0], before[grown[0]].size, !had, after[grown[0]].rel, f.Tear); err != nil {
			return nil, fail("%v", err)
		}
	default:
		return nil, fail("the batch appended to %d files (%v); a torn crash needs a store whose commit writes one file", len(grown), grown)
	}
	if err := restore(before, gone); err != nil {
		return torn, fail("%v", err)
	}
	return torn, nil
}

// commitKeepingUnlinked commits the batch through the inner store and puts
// back every file the commit removed or emptied: the retirement of a
// settled task's scratch failed, and its bytes stay on disk for the next
// open to ignore. It returns the inner commit's outcome; a file it could not keep
// is recorded on the handle, whose Restart then fails.
func (s *Storage) commitKeepingUnlinked(ctx context.Context, f Fault, batch storage.CommitBatch) (storage.Range, error) {
	before, err := s.disk.snapshot(true)
	if err != nil {
		s.shapeFailed(fmt.Errorf("fault: %s could not read the files before its commit: %w", f, err))
		return s.inner.Commit(ctx, batch)
	}
	r, err := s.inner.Commit(ctx, batch)
	if err != nil {
		return r, err
	}
	after, err := s.disk.snapshot(false)
	if err != nil {
		s.shapeFailed(fmt.Errorf("fault: %s could not list the files after its commit: %w", f, err))
		return r, nil
	}
	if err := restore(before, retired(before, after)); err != nil {
		s.shapeFailed(fmt.Errorf("fault: %s: %w", f, err))
	}
	return r, nil
}

// retired lists, sorted, the files a commit removed or emptied: a JSONL
// store retires a settled task's scratch file either way.
func retired(before, after map[string]fileImage) []string {
	var out []string
	for path, old := range before {
		if img, ok := after[path]; !ok || (img.size == 0 && old.size > 0) {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
}

// shapeFailed records that a fault could not shape the files as its plan
// says; the first such error is what Restart returns.
func (s *Storage) shapeFailed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.diskErr == nil {
		s.diskErr = err
	}
}

// restore writes back the files of paths as before holds them.
func restore(before map[string]fileImage, paths []string) error {
	for _, path := range paths {
		img := before[path]
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("restoring %s: %w", img.rel, err)
		}
		if err := os.WriteFile(path, img.data, img.mode.Perm()); err != nil {
			return fmt.Errorf("restoring %s: %w", img.rel, err)
		}
	}
	return nil
}

// cut truncates path inside the last line of what was appended after from
// (inside all of it, header included, when the commit created the file):
// the line keeps 1 to len-1 of its bytes, drawn from seed.
func cut(path string, from int64, created bool, rel string, seed uint32) (*TornLine, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	info, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, err
	}
	appended := make([]byte, info.Size()-from)
	_, err = file.ReadAt(appended, from)
	file.Close()
	if err != nil {
		return nil, err
	}
	if !bytes.HasSuffix(appended, []byte{'\n'}) {
		return nil, fmt.Errorf("%s: the batch's bytes do not end with a newline; a torn crash needs a store that writes lines", rel)
	}
	start := bytes.LastIndexByte(appended[:len(appended)-1], '\n') + 1
	if created {
		start = 0
	}
	t := &TornLine{File: rel, Offset: from + int64(start), Line: len(appended) - start}
	if t.Line >= 2 {
		t.Kept = 1 + rand.New(rand.NewPCG(uint64(seed), 0)).IntN(t.Line-1)
	}
	if err := os.Truncate(path, t.Offset+int64(t.Kept)); err != nil {
		return nil, err
	}
	return t, nil
}

// snapshot lists the regular files under d.Files by path, with their
// contents when withData is set. Missing entries are empty.
func (d *Disk) snapshot(withData bool) (map[string]fileImage, error) {
	out := map[string]fileImage{}
	for _, root := range d.Files {
		base := filepath.Dir(root)
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			switch {
			case errors.Is(err, fs.ErrNotExist) && path == root:
				return nil
			case err != nil:
				return err
			case !e.Type().IsRegular():
				return nil
			}
			info, err := e.Info()
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(base, path)
			if err != nil {
				return err
			}
			img := fileImage{rel: filepath.ToSlash(rel), size: info.Size(), mode: info.Mode()}
			if withData {
				if img.data, err = os.ReadFile(path); err != nil {
					return err
				}
				img.size = int64(len(img.data))
			}
			out[path] = img
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
