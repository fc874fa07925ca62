package localenv

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/pico-go/pico/core/agent"
)

// DefaultKillGrace is how long a cancelled process has between SIGTERM and
// SIGKILL, unless WithKillGrace says otherwise.
const DefaultKillGrace = 2 * time.Second

// Modes of everything the environment creates: the files it writes and the
// spill files, and the directories it makes for them. Output and files an
// agent writes are the user's, so nobody else on the machine may read them.
const (
	fileMode fs.FileMode = 0o600
	dirMode  fs.FileMode = 0o700
)

// Env is an agent.ExecutionEnv on the local machine: commands run as real
// processes under /bin/sh, and files are read and written on disk, confined
// to a root directory. Its methods may be called concurrently.
type Env struct {
	root      string        // absolute, symlinks resolved; read-only after New
	killGrace time.Duration // read-only after New

	mu         sync.Mutex // guards spillDir and spillReady
	spillDir   string     // "": a fresh directory under os.TempDir(), made on first use
	spillReady bool       // spillDir exists
}

var _ agent.ExecutionEnv = (*Env)(nil)

// Option configures an Env.
type Option func(*Env)

// WithKillGrace sets how long a cancelled process has between SIGTERM and
// SIGKILL (DefaultKillGrace when not given). Zero sends SIGKILL right after
// SIGTERM. A negative grace is a programmer error and panics.
func WithKillGrace(d time.Duration) Option {
	if d < 0 {
		panic(fmt.Sprintf("localenv: WithKillGrace(%v): the grace must not be negative", d))
	}
	return func(e *Env) { e.killGrace = d }
}

// WithSpillDir keeps spill files (agent.ExecOptions.SpillAfter) in dir,
// which is created (mode 0700) on first use if it does not exist. Without
// it they go to a directory made under os.TempDir() on first use. Either
// way the files outlive the Exec that wrote them: they are the caller's to
// read and remove.
func WithSpillDir(dir string) Option {
	return func(e *Env) { e.spillDir = dir }
}

// RootError is a root that New cannot use: it does not exist, cannot be
// resolved, or is not a directory.
type RootError struct {
	Root string
	Err  error
}

func (e *RootError) Error() string { return fmt.Sprintf("localenv: root %s: %v", e.Root, e.Err) }

func (e *RootError) Unwrap() error { return e.Err }

// New returns an environment confined to root, which must be an existing
// directory. Root's symlinks are resolved once, here: the confinement is to
// the directory root names now.
func New(root string, opts ...Option) (*Env, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, &RootError{Root: root, Err: err}
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, &RootError{Root: root, Err: err}
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, &RootError{Root: root, Err: err}
	}
	if !fi.IsDir() {
		return nil, &RootError{Root: root, Err: syscall.ENOTDIR}
	}
	e := &Env{root: real, killGrace: DefaultKillGrace}
	for _, o := range opts {
		o(e)
	}
	if e.spillDir != "" {
		d, err := filepath.Abs(e.spillDir)
		if err != nil {
			return nil, fmt.Errorf("localenv: spill directory %s: %w", e.spillDir, err)
		}
		e.spillDir = d
	}
	return e, nil
}

// Root is the directory the environment is confined to, absolute and with
// its symlinks resolved.
func (e *Env) Root() string { return e.root }
