package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Modes of what picosim creates: a session's files, traces and fuzz
// artifacts hold prompts, tool output and model answers, which are nobody
// else's to read.
const (
	fileMode = 0o600
	dirMode  = 0o700
)

// backendAvailable refuses a backend this build of picosim cannot run, as
// an environment error.
func backendAvailable(backend string) error {
	if backend == "sqlite" && errSQLiteUnavailable != nil {
		return &envError{errSQLiteUnavailable}
	}
	return nil
}

// sessionFile is the file of a backend's session in dir, the one to pass
// to picosim check; the memory backend has none.
func sessionFile(backend, dir string) string {
	switch backend {
	case "jsonl":
		return filepath.Join(dir, "session.jsonl")
	case "sqlite":
		return filepath.Join(dir, "sessions.db")
	}
	return ""
}

// tempDir makes a temporary directory (0700, in TMPDIR) that the caller
// removes; failing to make one is an environment error.
func tempDir(ctx context.Context, prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", &envError{fmt.Errorf("cannot make a temporary directory in %s (TMPDIR): %w", os.TempDir(), err)}
	}
	pauseIfAsked(ctx, "tempdir", dir)
	return dir, nil
}

// pauseEnv, for picosim's own tests only, names a point where the process
// says so on stderr ("picosim: paused in DIR") and waits for a signal:
// "tempdir", the first temporary directory it makes, or "commit:N", bench's
// Nth commit. A test interrupts a command there, with its directory full,
// then checks the directory is gone, without waiting on the wall clock.
const pauseEnv = "PICOSIM_PAUSE"

var pauseOnce sync.Once

func pauseIfAsked(ctx context.Context, point, dir string) {
	if os.Getenv(pauseEnv) != point {
		return
	}
	pauseOnce.Do(func() {
		fmt.Fprintf(os.Stderr, "picosim: paused in %s\n", dir)
		<-ctx.Done()
	})
}

// emptyDir makes sure dir exists (made 0700 if need be) and holds nothing,
// so that a run starts a new session there.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty; a run starts a new session", dir)
	}
	return nil
}

// writePrivate writes data to path (0600 when it creates the file). Not
// being able to create the file is the caller's path's fault (a usage
// error); a write or close that fails, such as on a full disk, is the
// machine's (an environment error). Either way nothing is claimed written.
func writePrivate(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fileMode)
	if err != nil {
		return &usageError{err.Error()}
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &envError{fmt.Errorf("writing %s: %w", path, err)}
	}
	return nil
}

// writeArtifact writes a fuzz artifact into dir, made 0700 if need be, and
// returns its path.
func writeArtifact(dir, name string, data []byte) (string, error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return "", &usageError{err.Error()}
	}
	path := filepath.Join(dir, name)
	return path, writePrivate(path, data)
}
