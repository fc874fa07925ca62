package jsonl

import (
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
	"syscall"

	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/internal/filelock"
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
	// WriteFault, when set, is asked before every line a commit writes,
	// with the file's path and the line (a new scratch file's header
	// included): an error makes the write stop after the line's first keep
	// bytes and fail with it, as on a full disk, and the store handles that
	// failure as any other (cut back, nothing published). A simulator's
	// fault layer injects write failures through it; nil writes every line.
	WriteFault func(path string, line []byte) (keep int, err error)
	// ParseAhead, when above 0, has every replay parse its lines ahead on
	// goroutines of its own, in chunks of that many lines, as a replay of
	// a file of 256 KiB or more does on a machine of more than one core:
	// so that a simulator's small files, on any machine, take the path a
	// long session's take. The replay's result is the same either way.
	ParseAhead int
}

// FormatVersion is the version of the file format this package writes:
// the header line and one batch per line after it. Format 2 added the
// state merges of patches and settles (merge.go); this package reads
// format 1 too, and goes on writing a format-1 session in format 1.
const FormatVersion = 2

// formatOldest is the oldest format this package reads.
const formatOldest = 1

// The header's magic names: a session's main file, and a task's scratch.
const (
	magicMain    = "session"
	magicScratch = "scratch"
)

// header is the first line of every file of a session. A file that does
// not start with one is not a session's, and is never modified.
type header struct {
	Pico   string     `json:"pico"`
	Format int        `json:"format"`
	Task   storage.ID `json:"task,omitempty"`
}

// batchBytesMax is the longest batch line, newline aside, that Commit
// writes and the reader accepts: storage.BatchBytesMax. It is a variable
// only so that this package's tests can lower it.
var batchBytesMax = storage.BatchBytesMax

// fileMode and dirMode keep session data private to its user.
const (
	fileMode fs.FileMode = 0o600
	dirMode  fs.FileMode = 0o700
)

// ErrNotSession is the cause of the *FileError for a file that is not a
// pico session file (no header, another program's JSON Lines).
var ErrNotSession = errors.New("not a pico session file: it has no pico header line")

// appendFile is what a store writes its lines to: an *os.File, or a test's
// file that fails on demand.
type appendFile interface {
	Write(p []byte) (int, error)
	Truncate(size int64) error
	Sync() error
	Close() error
	Name() string
	Stat() (fs.FileInfo, error)
}

// Store is a JSONL session: a main file and a scratch file per live task,
// replayed into memory on open.
type Store struct {
	*memory.Store
	path       string
	scratchDir string
	opts       Options
	lock       *filelock.Lock
	main       appendFile
	// sizes are the files' lengths through their last complete line: where
	// a failed write is cut back to.
	sizes map[string]int64
	// poisoned is the first write failure the store could not undo; every
	// later commit returns it.
	poisoned error
	// scratch holds the open scratch files of live tasks, so a streaming
	// task's frames cost a write each, not an open and a close; at most
	// scratchFilesOpenMax stay open.
	scratch map[storage.ID]appendFile
	// spares are settled tasks' scratch files, emptied and kept open, for
	// new tasks' scratch to take by renaming; at most scratchSparesMax.
	spares []spare
	// scratchDirReady is set once the scratch directory exists.
	scratchDirReady bool
	// unlinkFailures lists settled tasks whose retired scratch file could
	// not be removed; the main file's settlement makes them irrelevant.
	unlinkFailures []storage.ID
	// tornTails are the torn final lines open found and cut.
	tornTails []TornTail
	// lineBuf is where Commit encodes its line, kept from one commit to
	// the next (commits are serialized) unless it grew over lineBufMax.
	lineBuf []byte
	enc     lineEncoder
	// format is the main file's format, which its scratch files share;
	// only from format 2 on do lines carry state merges.
	format int
}

// lineBufMax bounds the buffer a store keeps for its lines.
const lineBufMax = 64 << 10

// scratchFilesOpenMax bounds the scratch files a store keeps open.
const scratchFilesOpenMax = 64

// scratchSparesMax bounds the settled tasks' scratch files a store keeps,
// emptied and open, for new tasks' scratch.
const scratchSparesMax = 8

// spare is a settled task's scratch file, emptied and still open under its
// name, for a new task's first scratch write to take by renaming it. Every
// task with scratch otherwise creates a file and unlinks it when it
// settles, which cost more than all the other writes of a JSONL turn
// together: on an ext4 file system without a journal, each inode
// allocation skips over every inode deleted in the last minutes.
type spare struct {
	f    appendFile
	path string
	// id is f's identity (its device and inode), asked of f once in its
	// life: whether path still names f is one stat of path.
	id fs.FileInfo
}

var _ storage.Storage = (*Store)(nil)

// line is one batch on disk. Task is set on scratch lines. Merges are the
// writes whose state the line holds as a merge (merge.go), which replay
// rebuilds before the batch goes further.
type line struct {
	First  storage.ID      `json:"first"`
	Task   storage.ID      `json:"task,omitempty"`
	Writes []storage.Write `json:"writes"`
	Merges []stateMerge    `json:"-"`
}

// stateMerge is the state of the line's write Index as the file holds it:
// a merge over the task's state before the line, less Drop.
type stateMerge struct {
	Index int
	Merge json.RawMessage
	Drop  []string
}

// appendTo appends m to ms if its write had a merge or a drop.
func (m stateMerge) appendTo(ms []stateMerge) []stateMerge {
	if m.Merge == nil && len(m.Drop) == 0 {
		return ms
	}
	if len(m.Drop) == 0 {
		m.Drop = nil
	}
	return append(ms, m)
}

// diskLine and diskWrite are a line as encoding/json reads and writes it,
// merges and all.
type diskLine struct {
	First  storage.ID  `json:"first"`
	Task   storage.ID  `json:"task,omitempty"`
	Writes []diskWrite `json:"writes"`
}

type diskWrite struct {
	storage.Write
	StateMerge json.RawMessage `json:"stateMerge,omitempty"`
	StateDrop  []string        `json:"stateDrop,omitempty"`
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

// TornTail is a final line that did not parse: the process died while
// writing it. Open cuts it off, once everything before it is known good.
type TornTail struct {
	Path   string
	Offset int64 // where the torn line starts
	Bytes  int   // how long it was
}

// Open opens (creating if needed) the session whose main file is path; its
// scratch files live in the directory path without ".jsonl" plus ".scratch",
// and its lock is the file path plus ".lock". A session has one writer: a
// second Open while the first is open, in this process or another, fails
// with a *storage.LockedError. A file that is not a session's is refused
// and left as it is; an open that fails changes nothing on disk.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	lock, err := filelock.Acquire(path+".lock", path)
	if err != nil {
		return nil, err
	}
	s := &Store{
		Store: memory.New(), path: path, opts: opts, lock: lock, sizes: map[string]int64{},
		scratchDir: strings.TrimSuffix(path, ".jsonl") + ".scratch",
	}
	if err := s.open(ctx); err != nil {
		lock.Release()
		return nil, err
	}
	return s, nil
}

// open replays the files, checks that they agree, and only then repairs
// what a crash left (torn tails, a missing final newline, retired scratch)
// and opens the main file for appending.
func (s *Store) open(ctx context.Context) error {
	main, exists, err := s.replayFile(ctx, s.path, 0)
	if err != nil {
		return err
	}
	files := []*replayed{main}
	retired, err := s.replayScratch(ctx, &files)
	if err != nil {
		return err
	}
	if err := checkOverlaps(files); err != nil {
		return err
	}
	for _, r := range files {
		if err := r.repair(); err != nil {
			return err
		}
		s.tornTails = append(s.tornTails, r.torn...)
		if !r.remove {
			s.sizes[r.path] = r.size
		}
	}
	for _, p := range retired {
		_ = os.Remove(p) // retired: finish the unlink if we can
	}
	if !exists {
		return s.create()
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, fileMode)
	if err != nil {
		return &FileError{Path: s.path, Err: err}
	}
	s.main = f
	return nil
}

// create writes a new session's main file, header first, under a temporary
// name and renames it into place, so that a file at path always starts
// with its header.
func (s *Store) create() error {
	tmp := s.path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, fileMode)
	if err != nil {
		return &FileError{Path: s.path, Err: err}
	}
	s.format = FormatVersion
	raw := headerLine(header{Pico: magicMain, Format: s.format})
	if _, err := f.Write(raw); err != nil {
		f.Close()
		os.Remove(tmp)
		return &FileError{Path: s.path, Err: err}
	}
	if s.opts.Fsync {
		if err := f.Sync(); err != nil {
			f.Close()
			os.Remove(tmp)
			return &FileError{Path: s.path, Err: err}
		}
	}
	if err := os.Rename(tmp, s.path); err != nil {
		f.Close()
		os.Remove(tmp)
		return &FileError{Path: s.path, Err: err}
	}
	if err := s.syncDir(filepath.Dir(s.path)); err != nil {
		f.Close()
		return err
	}
	s.main = &namedFile{appendFile: f, name: s.path}
	s.sizes[s.path] = int64(len(raw))
	return nil
}

// namedFile is a file opened under one name and renamed (the main file
// created under a temporary name, a spare taken for another task's
// scratch): errors name where it is now.
type namedFile struct {
	appendFile
	name string
	id   fs.FileInfo // a spare's identity (spare.id), nil for the main file
}

func (f *namedFile) Name() string { return f.name }

func headerLine(h header) []byte {
	raw, _ := json.Marshal(h)
	return append(raw, '\n')
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

// replayed is what replaying one file found: its batches' sequence ranges
// (for the cross-file check), where its last complete line ends, and what a
// crash left that open must repair.
type replayed struct {
	path   string
	ranges []batchRange
	size   int64 // through the last kept line, newline included
	// cut is set when a torn final line must be cut at size; newline when
	// a complete final line only lacks its newline; remove when the file
	// is a scratch file whose first write was torn in its header.
	cut, newline, remove bool
	torn                 []TornTail
}

type batchRange struct {
	first, last storage.ID
	line        int
}

// repair cuts a torn tail or ends a complete final line, now that every
// batch of the session is known good.
func (r *replayed) repair() error {
	switch {
	case r.remove:
		if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return &FileError{Path: r.path, Err: fmt.Errorf("removing a scratch file torn in its header: %w", err)}
		}
	case r.cut:
		if err := os.Truncate(r.path, r.size); err != nil {
			return &FileError{Path: r.path, Err: fmt.Errorf("cutting a torn final line: %w", err)}
		}
	case r.newline:
		f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND, fileMode)
		if err != nil {
			return &FileError{Path: r.path, Err: err}
		}
		_, err = f.Write([]byte{'\n'})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return &FileError{Path: r.path, Err: fmt.Errorf("ending the final line: %w", err)}
		}
	}
	return nil
}

// replayFile applies every complete line of a file after checking its
// header; task is the scratch file's task (0 for the main file). It reads
// and changes nothing on disk; a missing file replays as empty (exists
// false). A final line that does not parse is torn and left to repair; a
// malformed line before it fails.
func (s *Store) replayFile(ctx context.Context, path string, task storage.ID) (r *replayed, exists bool, err error) {
	r = &replayed{path: path}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return nil, true, &FileError{Path: path, Err: err}
	}
	want := header{Pico: magicMain}
	if task != 0 {
		want = header{Pico: magicScratch, Format: s.format, Task: task}
		if line := headerLine(want); len(data) < len(line) && bytes.HasPrefix(line, data) {
			// The task's first scratch write (its header and first batch)
			// never completed, so nothing in the file was acknowledged: it
			// is a torn tail from its first byte, and goes.
			r.remove = true
			r.torn = append(r.torn, TornTail{Path: path, Offset: 0, Bytes: len(data)})
			return r, true, nil
		}
	}
	rest, format, err := checkHeader(data, want)
	if err != nil {
		return nil, true, &FileError{Path: path, Line: 1, Err: err}
	}
	if task == 0 {
		s.format = format
	}
	r.size = int64(len(data) - len(rest))
	prevLast := storage.ID(0)
	lines := newLineReader(rest, s.opts.ParseAhead)
	defer lines.stop()
	for n := 2; ; n++ {
		pl := lines.line()
		if pl == nil {
			break
		}
		if plant.On("jsonl-replay-drops-last") && task == 0 && pl.complete && pl.last && n > 3 {
			break
		}
		text := pl.text
		if pl.tooLong {
			return nil, true, &FileError{Path: path, Line: n, Err: &storage.BatchTooLargeError{Bytes: len(text), Max: batchBytesMax}}
		}
		if pl.err != nil {
			if !pl.complete {
				// The process died while writing this line: nothing
				// acknowledged it, so it is cut once the rest is good.
				r.cut = !plant.On("jsonl-torn-tail-kept")
				r.torn = append(r.torn, TornTail{Path: path, Offset: r.size, Bytes: len(text)})
				break
			}
			return nil, true, &FileError{Path: path, Line: n, Err: pl.err}
		}
		l := pl.l
		if l.First <= prevLast || len(l.Writes) == 0 {
			return nil, true, &FileError{Path: path, Line: n, Err: fmt.Errorf("batch at %d overlaps the previous one or is empty (ranges must increase)", l.First)}
		}
		if l.Task != task {
			return nil, true, &FileError{Path: path, Line: n, Err: fmt.Errorf("batch of task %d in the file of task %d", l.Task, task)}
		}
		if len(l.Merges) > 0 {
			if err := s.merge(l, task, format); err != nil {
				return nil, true, &FileError{Path: path, Line: n, Err: err}
			}
		}
		batch := storage.CommitBatch{Kind: storage.BatchMain, Writes: l.Writes}
		if task != 0 {
			batch = storage.CommitBatch{Kind: storage.BatchScratch, Task: task, Writes: l.Writes}
		}
		if s.opts.Verify != nil {
			if err := s.opts.Verify(ctx, s.Store, batch); err != nil {
				return nil, true, &FileError{Path: path, Line: n, Err: err}
			}
		}
		if err := s.Store.ApplyDecoded(ctx, batch, l.First); err != nil { // parseLine parsed its values
			return nil, true, &FileError{Path: path, Line: n, Err: err}
		}
		prevLast = l.First + storage.ID(len(l.Writes)) - 1
		r.ranges = append(r.ranges, batchRange{first: l.First, last: prevLast, line: n})
		r.size += int64(len(text))
		if pl.complete {
			r.size++
		} else {
			r.newline = true // a complete batch that only lacks its newline is kept
		}
	}
	return r, true, nil
}

// checkHeader checks that data starts with the wanted header line and
// returns what follows it, and the file's format. A want of format 0
// takes any format this package reads.
func checkHeader(data []byte, want header) ([]byte, int, error) {
	first, rest, complete := bytes.Cut(data, []byte{'\n'})
	var h header
	dec := json.NewDecoder(bytes.NewReader(first))
	dec.DisallowUnknownFields()
	if !complete || dec.Decode(&h) != nil || dec.More() || h.Pico == "" {
		return nil, 0, ErrNotSession
	}
	switch {
	case h.Pico != want.Pico:
		return nil, 0, fmt.Errorf("%w (its header names %q, want %q)", ErrNotSession, h.Pico, want.Pico)
	case h.Format < formatOldest || h.Format > FormatVersion:
		return nil, 0, fmt.Errorf("the file is format %d; this build reads formats %d to %d", h.Format, formatOldest, FormatVersion)
	case want.Format != 0 && h.Format != want.Format:
		return nil, 0, fmt.Errorf("the scratch file is format %d, its session's main file format %d", h.Format, want.Format)
	case h.Task != want.Task:
		return nil, 0, fmt.Errorf("the scratch file of task %d is named for task %d", h.Task, want.Task)
	}
	return rest, h.Format, nil
}

// merge rebuilds the states l holds as merges (merge.go), over the states
// the store holds before the line. Only a format-2 main file's patches and
// settles may have them, each on a task the line has not written before.
func (s *Store) merge(l line, task storage.ID, format int) error {
	for _, m := range l.Merges {
		w := &l.Writes[m.Index]
		switch {
		case format < 2:
			return fmt.Errorf("write %d has a state merge, which format %d files do not have", m.Index, format)
		case task != 0:
			return fmt.Errorf("write %d has a state merge, which scratch files do not have", m.Index)
		case w.Type != storage.WritePatch && w.Type != storage.WriteSettle:
			return fmt.Errorf("write %d (%s) has a state merge, which only a patch or settle has", m.Index, w.Type)
		case len(w.State) != 0:
			return &MergeError{Task: w.ID, Reason: fmt.Sprintf("write %d has both a state and a state merge", m.Index)}
		case m.Merge == nil:
			return &MergeError{Task: w.ID, Reason: fmt.Sprintf("write %d drops members without a stateMerge", m.Index)}
		case writtenBefore(l.Writes[:m.Index], w.ID):
			return &MergeError{Task: w.ID, Reason: fmt.Sprintf("write %d merges over a task an earlier write of its batch wrote", m.Index)}
		}
		prev, ok := s.Store.TaskState(w.ID)
		if !ok {
			return &MergeError{Task: w.ID, Reason: "the session holds no such task before the line"}
		}
		state, err := mergedState(w.ID, prev, m.Merge, m.Drop, &s.enc.members)
		if err != nil {
			return err
		}
		w.State = state
	}
	return nil
}

// parseLine decodes one batch line strictly: by hand when the line is as
// Commit writes them, else with encoding/json. Its writes may be read into
// the array of writes, whose elements the caller no longer needs: a replay
// reads every line's writes into one array, since the memory store keeps
// what the writes point to but never the writes themselves.
func parseLine(text []byte, writes []storage.Write) (line, error) {
	if l, ok := decodeLine(text, writes); ok {
		if jsonvalue.Checking() {
			slow, err := parseLineSlow(text)
			if err := jsonvalue.Differ("jsonl line", text, l, slow, err); err != nil {
				return line{}, err
			}
		}
		return l, nil
	}
	return parseLineSlow(text)
}

// parseLineSlow decodes one batch line strictly with encoding/json.
func parseLineSlow(text []byte) (line, error) {
	var dl diskLine
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	err := dec.Decode(&dl)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the batch")
	}
	l := line{First: dl.First, Task: dl.Task}
	if dl.Writes != nil {
		l.Writes = make([]storage.Write, len(dl.Writes))
	}
	for i, w := range dl.Writes {
		l.Writes[i] = w.Write
		l.Merges = stateMerge{Index: i, Merge: w.StateMerge, Drop: w.StateDrop}.appendTo(l.Merges)
	}
	return l, err
}

// checkOverlaps holds the files to one sequence line (§7.4): no sequence
// is used by two batches, across the main file and the live scratch files.
func checkOverlaps(files []*replayed) error {
	type owned struct {
		batchRange
		path string
	}
	var all []owned
	for _, f := range files {
		for _, r := range f.ranges {
			all = append(all, owned{r, f.path})
		}
	}
	slices.SortFunc(all, func(a, b owned) int { return int(a.first - b.first) })
	for i := 1; i < len(all); i++ {
		prev, cur := all[i-1], all[i]
		if cur.first <= prev.last {
			return &FileError{Path: cur.path, Line: cur.line, Err: fmt.Errorf(
				"batch %d–%d overlaps batch %d–%d of %s line %d: two batches cannot share a sequence",
				cur.first, cur.last, prev.first, prev.last, prev.path, prev.line)}
		}
	}
	return nil
}

// replayScratch replays the scratch files of tasks that are still live
// after the main file, adding them to files. Retired scratch (a settled
// task whose unlink failed) is ignored even if malformed: its settlement
// covers its sequences; its path is returned for open to remove.
func (s *Store) replayScratch(ctx context.Context, files *[]*replayed) (retired []string, err error) {
	names, err := os.ReadDir(s.scratchDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &FileError{Path: s.scratchDir, Err: err}
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
		return nil, err
	}
	for _, id := range tasks {
		path := s.scratchFile(id)
		if t, ok := got[id]; !ok || !t.Live() {
			retired = append(retired, path)
			continue
		}
		r, _, err := s.replayFile(ctx, path, id)
		if err != nil {
			return nil, err
		}
		*files = append(*files, r)
	}
	return retired, nil
}

func (s *Store) scratchFile(task storage.ID) string {
	return filepath.Join(s.scratchDir, task.String())
}

// TornTails lists the torn final lines open cut: what a crash mid-write
// left, for a checker to report.
func (s *Store) TornTails() []TornTail { return slices.Clone(s.tornTails) }

// Commit validates the batch, writes its line to the one file it belongs
// to, then publishes it to memory. A batch over storage.BatchBytesMax is
// rejected before anything is written. A failed write is cut back to the
// file's last complete line and returned; if it cannot be cut back, the
// store is poisoned and every later commit returns a *storage.PoisonedError
// with that first failure. A settle also retires the settled task's scratch
// file afterwards (retireScratch); failing to is harmless and recorded.
func (s *Store) Commit(ctx context.Context, batch storage.CommitBatch) (storage.Range, error) {
	if s.poisoned != nil {
		return storage.Range{}, &storage.PoisonedError{Err: s.poisoned}
	}
	last := s.Store.LastSeq()
	if err := s.Store.Validate(ctx, batch); err != nil {
		return storage.Range{}, err
	}
	if len(batch.Writes) == 0 {
		return storage.Range{First: last + 1, Last: last}, nil
	}
	first := last + 1
	var prior priorStates
	if batch.Kind != storage.BatchScratch && s.format >= 2 {
		prior = s.Store
	}
	raw, full, err := s.enc.encode(s.lineBuf[:0], line{First: first, Task: batch.Task, Writes: batch.Writes}, prior)
	if err != nil {
		return storage.Range{}, fmt.Errorf("jsonl: encoding batch %d: %w", first, err)
	}
	if full > batchBytesMax { // the limit is the batch's, whatever the merges save
		return storage.Range{}, &storage.BatchError{Index: -1, Seq: first, Rule: "batch over the size limit", Err: &storage.BatchTooLargeError{Bytes: full, Max: batchBytesMax}}
	}
	raw = append(raw, '\n')
	if cap(raw) <= lineBufMax {
		s.lineBuf = raw[:0] // the next commit's: the files copy what they are given
	}
	early := plant.On("jsonl-publish-before-write")
	if early {
		s.Store.Publish(batch)
	}
	if batch.Kind == storage.BatchScratch {
		err = s.appendScratch(batch.Task, raw)
	} else {
		err = s.write(s.main, raw)
	}
	if err != nil {
		return storage.Range{}, err
	}
	if !early {
		s.Store.Publish(batch) // validated above; the bytes are written: publish
	}
	for _, w := range batch.Writes {
		if w.Type == storage.WriteSettle {
			s.retireScratch(w.ID)
		}
	}
	return storage.Range{First: first, Last: first + storage.ID(len(batch.Writes)) - 1}, nil
}

// write appends one line to f. A failed write (a short write, a full disk)
// is cut back to the file's last complete line, so the next line starts
// clean; a failed sync may have lost bytes the file shows, so it poisons.
func (s *Store) write(f appendFile, raw []byte) error {
	if f == nil {
		return storage.ErrClosed
	}
	path := f.Name()
	if err := s.writeLine(f, path, raw); err != nil {
		good := s.sizes[path]
		if plant.On("jsonl-failed-write-kept") {
			return &FileError{Path: path, Err: err}
		}
		if terr := f.Truncate(good); terr != nil {
			return s.poison(&FileError{Path: path, Err: fmt.Errorf("%w; cutting back to offset %d failed too: %v", err, good, terr)})
		}
		return &FileError{Path: path, Err: fmt.Errorf("%w (nothing of the batch is kept: the file was cut back to offset %d)", err, good)}
	}
	if s.opts.Fsync {
		if err := f.Sync(); err != nil {
			return s.poison(&FileError{Path: path, Err: fmt.Errorf("sync: %w", err)})
		}
	}
	s.sizes[path] += int64(len(raw))
	return nil
}

// writeLine writes raw to f whole, or as much of it as opts.WriteFault
// lets through before it fails the write.
func (s *Store) writeLine(f appendFile, path string, raw []byte) error {
	if s.opts.WriteFault != nil {
		if keep, err := s.opts.WriteFault(path, raw); err != nil {
			if keep = min(max(keep, 0), len(raw)); keep > 0 {
				_, _ = f.Write(raw[:keep]) // what reached the disk before it filled
			}
			return err
		}
	}
	_, err := f.Write(raw)
	return err
}

// poison records the first failure the store cannot undo.
func (s *Store) poison(err error) error {
	if s.poisoned == nil {
		s.poisoned = err
	}
	return err
}

func (s *Store) appendScratch(task storage.ID, raw []byte) error {
	if f := s.scratch[task]; f != nil {
		return s.write(f, raw)
	}
	return s.openScratch(task, raw)
}

// openScratch opens a task's scratch file for appending, writes raw to it
// and keeps it open. A task without a file yet gets one, its header and
// raw in one write: a crash or a failed write then leaves at most a torn
// header, which open knows for what it is; a failed write takes the file
// away again.
func (s *Store) openScratch(task storage.ID, raw []byte) error {
	if !s.scratchDirReady {
		_, statErr := os.Stat(s.scratchDir)
		if err := os.MkdirAll(s.scratchDir, dirMode); err != nil {
			return &FileError{Path: s.scratchDir, Err: err}
		}
		if errors.Is(statErr, fs.ErrNotExist) {
			if err := s.syncDir(filepath.Dir(s.scratchDir)); err != nil {
				return err
			}
		}
		s.scratchDirReady = true
	}
	path := s.scratchFile(task)
	_, known := s.sizes[path]
	// No live file was replayed for this task: a new one, a spare renamed
	// or a file created. One that is there anyway is a retired leftover
	// open could not remove, which either replaces.
	var f appendFile
	if !known {
		f = s.takeSpare(path)
	}
	if f == nil {
		var err error
		if f, err = openScratchFile(path, !known); err != nil {
			return &FileError{Path: path, Err: err}
		}
	}
	if known {
		if err := s.write(f, raw); err != nil {
			f.Close()
			return err
		}
	} else {
		s.sizes[path] = 0
		first := append(headerLine(header{Pico: magicScratch, Format: s.format, Task: task}), raw...)
		if err := s.write(f, first); err != nil {
			f.Close()
			delete(s.sizes, path)
			_ = os.Remove(path) // an empty file; open would skip it anyway
			return err
		}
		if err := s.syncDir(s.scratchDir); err != nil {
			f.Close()
			return err
		}
	}
	if s.scratch == nil {
		s.scratch = map[storage.ID]appendFile{}
	}
	if len(s.scratch) >= scratchFilesOpenMax {
		s.closeScratch()
	}
	s.scratch[task] = f
	return nil
}

// openScratchFile opens a scratch file: openAppend, or a test's file that
// fails on demand.
var openScratchFile = func(path string, create bool) (appendFile, error) { return openAppend(path, create) }

// openAppend opens path for appending (creating it, empty, when create is
// set) as os.OpenFile does, but as a file the runtime never tries to poll:
// four fcntl calls and an epoll_ctl fewer for every scratch file.
func openAppend(path string, create bool) (*os.File, error) {
	flags := syscall.O_WRONLY | syscall.O_APPEND | syscall.O_CLOEXEC
	if create {
		flags |= syscall.O_CREAT | syscall.O_TRUNC
	}
	for {
		fd, err := syscall.Open(path, flags, uint32(fileMode))
		if err == nil {
			return os.NewFile(uintptr(fd), path), nil
		}
		if err != syscall.EINTR {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
	}
}

// retireScratch retires a settled task's scratch file now that the main
// file's settlement has made its bytes irrelevant: emptied and kept as a
// spare while its path still names it, or closed and unlinked. An emptied
// or leftover file of a settled task is what open removes. Failing to is
// harmless and recorded.
func (s *Store) retireScratch(task storage.ID) {
	path := s.scratchFile(task)
	f := s.scratch[task]
	delete(s.scratch, task)
	if _, ok := s.sizes[path]; !ok {
		if f != nil {
			_ = f.Close()
		}
		return // the task never had a scratch file
	}
	delete(s.sizes, path)
	if f != nil {
		sp := spare{f: f, path: path}
		if r, ok := f.(*namedFile); ok {
			sp.f, sp.id = r.appendFile, r.id
		}
		if len(s.spares) < scratchSparesMax && sp.f.Truncate(0) == nil && sp.identify() && sp.untouched() {
			s.spares = append(s.spares, sp)
			return
		}
		_ = sp.f.Close()
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.unlinkFailures = append(s.unlinkFailures, task)
	}
}

// takeSpare renames the newest spare to path and returns it open, or nil
// when there is none. A spare that is no longer as the store left it (its
// name another file's, or bytes written to it behind the store's back) is
// closed and left for open to remove, as is one the rename fails for.
func (s *Store) takeSpare(path string) appendFile {
	for len(s.spares) > 0 {
		sp := s.spares[len(s.spares)-1]
		s.spares = s.spares[:len(s.spares)-1]
		// syscall's rename, not os.Rename: that asks first whether path is
		// a directory, which the kernel's refusal to rename a file over one
		// answers anyway.
		if sp.untouched() && syscall.Rename(sp.path, path) == nil {
			return &namedFile{appendFile: sp.f, name: path, id: sp.id}
		}
		_ = sp.f.Close()
	}
	return nil
}

// identify learns the spare's identity from its file, unless it knows it
// from an earlier retirement of the same file; false when it cannot.
func (sp *spare) identify() bool {
	if sp.id == nil {
		sp.id, _ = sp.f.Stat()
	}
	return sp.id != nil
}

// untouched reports whether the spare is still the empty file at its path:
// what its path names now is its file, and holds nothing.
func (sp spare) untouched() bool {
	named, err := os.Stat(sp.path)
	return err == nil && os.SameFile(sp.id, named) && named.Size() == 0
}

// dropSpares closes the spares and unlinks those still as the store left
// them; open would remove them too.
func (s *Store) dropSpares() {
	for _, sp := range s.spares {
		if sp.untouched() {
			_ = os.Remove(sp.path)
		}
		_ = sp.f.Close()
	}
	s.spares = nil
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

// Close closes the files, releases the session's lock and closes the store.
func (s *Store) Close(ctx context.Context) error {
	if err := s.Store.Close(ctx); err != nil {
		return err
	}
	defer s.lock.Release()
	serr := s.closeScratch()
	s.dropSpares()
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
