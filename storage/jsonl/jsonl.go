package jsonl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// Options configures a JSONL session.
type Options struct {
	// Fsync syncs every written line to stable storage before the commit
	// is published. Without it a commit survives a process crash (the
	// bytes are in the operating system) but not a machine crash.
	Fsync bool
	// Verify, when set, is called while the files are replayed on open,
	// for every batch before it is applied, with the session as it stands
	// before the batch. An error fails the open with a *FileError naming
	// the file and line. A reader that holds a session to more rules than
	// the storage layer checks sets it (picosim check passes
	// agent.ValidateBatch).
	Verify func(ctx context.Context, before storage.Storage, batch storage.CommitBatch) error
}

// lineMax bounds one batch line, so a corrupt file cannot make open read
// without limit.
const lineMax = 256 << 20

// fileMode and dirMode keep session data private to its user.
const (
	fileMode fs.FileMode = 0o600
	dirMode  fs.FileMode = 0o700
)

// Store is a JSONL session.
type Store struct {
	*memory.Store
	path       string
	scratchDir string
	opts       Options
	main       *os.File
	// scratch holds the open scratch files of live tasks, so a streaming
	// task's frames cost a write each, not an open and a close; at most
	// scratchFilesOpenMax stay open.
	scratch map[storage.ID]*os.File
	// scratchDirReady is set once the scratch directory exists.
	scratchDirReady bool
	// unlinkFailures lists settled tasks whose retired scratch file could
	// not be removed; the main file's settlement makes them irrelevant.
	unlinkFailures []storage.ID
}

// scratchFilesOpenMax bounds the scratch files a store keeps open.
const scratchFilesOpenMax = 64

var _ storage.Storage = (*Store)(nil)

// line is one batch on disk. Task is set on scratch lines.
type line struct {
	First  storage.ID      `json:"first"`
	Task   storage.ID      `json:"task,omitempty"`
	Writes []storage.Write `json:"writes"`
}

// FileError reports a malformed or unreadable session file.
type FileError struct {
	Path string
	Line int // 1-based; 0 when the problem is the file as a whole
	Err  error
}

func (e *FileError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("jsonl: %s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("jsonl: %s: line %d: %v", e.Path, e.Line, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// Open opens (creating if needed) the session whose main file is path; its
// scratch files live in the directory path without ".jsonl" plus ".scratch".
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	s := &Store{
		Store: memory.New(), path: path, opts: opts,
		scratchDir: strings.TrimSuffix(path, ".jsonl") + ".scratch",
	}
	if err := s.replayFile(ctx, path, 0); err != nil {
		return nil, err
	}
	if err := s.replayScratch(ctx); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, fileMode)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	s.main = f
	if errors.Is(statErr, fs.ErrNotExist) {
		// A new file survives a power loss only once its directory entry
		// is on disk too.
		if err := s.syncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, err
		}
	}
	return s, nil
}

// syncDir makes directory entries durable, when the fsync policy asks for it.
func (s *Store) syncDir(dir string) error {
	if !s.opts.Fsync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return &FileError{Path: dir, Err: err}
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return &FileError{Path: dir, Err: err}
	}
	return nil
}

// replayFile applies every complete line of a file. A torn final line is
// cut off the file; a malformed complete line fails. For a scratch file,
// task names the task whose scope its batches must write.
func (s *Store) replayFile(ctx context.Context, path string, task storage.ID) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &FileError{Path: path, Err: err}
	}
	complete := bytes.LastIndexByte(data, '\n') + 1
	if complete < len(data) {
		// A torn write: the process died mid-line. Remove it before anything
		// is appended after it.
		if err := os.Truncate(path, int64(complete)); err != nil {
			return &FileError{Path: path, Err: fmt.Errorf("cutting a torn final line: %w", err)}
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data[:complete]))
	sc.Buffer(make([]byte, 0, 64<<10), lineMax)
	prevLast := storage.ID(0)
	for n := 1; sc.Scan(); n++ {
		var l line
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return &FileError{Path: path, Line: n, Err: err}
		}
		if dec.More() {
			return &FileError{Path: path, Line: n, Err: errors.New("trailing data after the batch")}
		}
		if l.First <= prevLast || len(l.Writes) == 0 {
			return &FileError{Path: path, Line: n, Err: fmt.Errorf("batch at %d overlaps the previous one or is empty (ranges must increase)", l.First)}
		}
		if l.Task != task {
			return &FileError{Path: path, Line: n, Err: fmt.Errorf("batch of task %d in the file of task %d", l.Task, task)}
		}
		batch := storage.CommitBatch{Kind: storage.BatchMain, Writes: l.Writes}
		if task != 0 {
			batch = storage.CommitBatch{Kind: storage.BatchScratch, Task: task, Writes: l.Writes}
		}
		if s.opts.Verify != nil {
			if err := s.opts.Verify(ctx, s.Store, batch); err != nil {
				return &FileError{Path: path, Line: n, Err: err}
			}
		}
		if err := s.Store.Apply(ctx, batch, l.First); err != nil {
			return &FileError{Path: path, Line: n, Err: err}
		}
		prevLast = l.First + storage.ID(len(l.Writes)) - 1
	}
	if err := sc.Err(); err != nil {
		return &FileError{Path: path, Err: err}
	}
	return nil
}

// replayScratch replays the scratch files of tasks that are still live
// after the main file. Retired scratch (a settled task whose unlink failed)
// is ignored even if malformed: its settlement covers its sequences.
func (s *Store) replayScratch(ctx context.Context) error {
	names, err := os.ReadDir(s.scratchDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &FileError{Path: s.scratchDir, Err: err}
	}
	var tasks []storage.ID
	for _, n := range names {
		id, err := strconv.ParseInt(n.Name(), 10, 64)
		if err != nil || id <= 0 {
			continue // not ours
		}
		tasks = append(tasks, storage.ID(id))
	}
	slices.Sort(tasks)
	got, err := s.Store.GetTasks(ctx, tasks)
	if err != nil {
		return err
	}
	for _, id := range tasks {
		path := s.scratchFile(id)
		if t, ok := got[id]; !ok || !t.Live() {
			_ = os.Remove(path) // retired: finish the unlink if we can
			continue
		}
		if err := s.replayFile(ctx, path, id); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) scratchFile(task storage.ID) string {
	return filepath.Join(s.scratchDir, task.String())
}

// Commit validates the batch, writes its line to the one file it belongs
// to, then publishes it to memory. A settle also unlinks the settled task's
// scratch file afterwards; failing to is harmless and recorded.
func (s *Store) Commit(ctx context.Context, batch storage.CommitBatch) (storage.Range, error) {
	last := s.Store.LastSeq()
	if len(batch.Writes) == 0 {
		if err := s.Store.Validate(ctx, batch); err != nil {
			return storage.Range{}, err
		}
		return storage.Range{First: last + 1, Last: last}, nil
	}
	if err := s.Store.Validate(ctx, batch); err != nil {
		return storage.Range{}, err
	}
	first := last + 1
	raw, err := json.Marshal(line{First: first, Task: batch.Task, Writes: batch.Writes})
	if err != nil {
		return storage.Range{}, fmt.Errorf("jsonl: encoding batch %d: %w", first, err)
	}
	raw = append(raw, '\n')
	if batch.Kind == storage.BatchScratch {
		err = s.appendScratch(batch.Task, raw)
	} else {
		err = s.write(s.main, raw)
	}
	if err != nil {
		return storage.Range{}, err
	}
	s.Store.Publish(batch) // validated above; the bytes are written: publish
	for _, w := range batch.Writes {
		if w.Type == storage.WriteSettle {
			if f := s.scratch[w.ID]; f != nil {
				_ = f.Close() // retired: its bytes no longer matter
				delete(s.scratch, w.ID)
			}
			if err := os.Remove(s.scratchFile(w.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.unlinkFailures = append(s.unlinkFailures, w.ID)
			}
		}
	}
	return storage.Range{First: first, Last: first + storage.ID(len(batch.Writes)) - 1}, nil
}

func (s *Store) write(f *os.File, raw []byte) error {
	if f == nil {
		return storage.ErrClosed
	}
	if _, err := f.Write(raw); err != nil {
		return &FileError{Path: f.Name(), Err: err}
	}
	if s.opts.Fsync {
		if err := f.Sync(); err != nil {
			return &FileError{Path: f.Name(), Err: err}
		}
	}
	return nil
}

func (s *Store) appendScratch(task storage.ID, raw []byte) error {
	f := s.scratch[task]
	if f == nil {
		var err error
		if f, err = s.openScratch(task); err != nil {
			return err
		}
	}
	return s.write(f, raw)
}

// openScratch opens (creating if need be) a task's scratch file for
// appending and keeps it open.
func (s *Store) openScratch(task storage.ID) (*os.File, error) {
	if !s.scratchDirReady {
		_, statErr := os.Stat(s.scratchDir)
		if err := os.MkdirAll(s.scratchDir, dirMode); err != nil {
			return nil, &FileError{Path: s.scratchDir, Err: err}
		}
		if errors.Is(statErr, fs.ErrNotExist) {
			if err := s.syncDir(filepath.Dir(s.scratchDir)); err != nil {
				return nil, err
			}
		}
		s.scratchDirReady = true
	}
	path := s.scratchFile(task)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, fileMode)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := s.syncDir(s.scratchDir); err != nil {
			f.Close()
			return nil, err
		}
	}
	if s.scratch == nil {
		s.scratch = map[storage.ID]*os.File{}
	}
	if len(s.scratch) >= scratchFilesOpenMax {
		s.closeScratch()
	}
	s.scratch[task] = f
	return f, nil
}

// closeScratch closes every open scratch file; their bytes are written.
func (s *Store) closeScratch() error {
	var first error
	for id, f := range s.scratch {
		if err := f.Close(); err != nil && first == nil {
			first = &FileError{Path: f.Name(), Err: err}
		}
		delete(s.scratch, id)
	}
	return first
}

// UnlinkFailures lists settled tasks whose scratch file could not be removed.
func (s *Store) UnlinkFailures() []storage.ID { return slices.Clone(s.unlinkFailures) }

// Close closes the main file and the store.
func (s *Store) Close(ctx context.Context) error {
	if err := s.Store.Close(ctx); err != nil {
		return err
	}
	serr := s.closeScratch()
	if s.main == nil {
		return serr
	}
	err := s.main.Close()
	s.main = nil
	if err != nil {
		return &FileError{Path: s.path, Err: err}
	}
	return serr
}
