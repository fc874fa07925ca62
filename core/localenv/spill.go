package localenv

import (
	"errors"
	"fmt"
	"os"
)

// spill keeps the whole output of one Exec once it outgrows the caller's
// window (agent.ExecOptions.SpillAfter): both streams, interleaved in the
// order Exec delivered them. Up to the window it holds the output in
// memory; the first byte past it opens the file, which gets what was held
// and, from then on, every chunk as it comes. An output that never passes
// the window never touches the disk.
//
// It is used only from the goroutine that called Exec.
type spill struct {
	env   *Env
	after int    // SpillAfter; 0: keep nothing
	held  []byte // the output so far, while it fits in after bytes
	f     *os.File
	err   error // the first failure; once set, the spill is abandoned
}

func (s *spill) write(data string) {
	if s.after <= 0 || s.err != nil {
		return
	}
	if s.f == nil {
		if len(s.held)+len(data) <= s.after {
			s.held = append(s.held, data...)
			return
		}
		if s.f, s.err = s.env.createSpill(); s.err != nil {
			return
		}
		_, s.err = s.f.Write(s.held)
		s.held = nil
	}
	if s.err == nil {
		_, s.err = s.f.WriteString(data)
	}
}

// finish closes the file and returns its path: "" when the output stayed
// within the window. A spill that failed is removed and reported.
func (s *spill) finish() (string, error) {
	if s.f == nil {
		if s.err != nil {
			return "", fmt.Errorf("localenv: spill: %w", s.err)
		}
		return "", nil
	}
	err := errors.Join(s.err, s.f.Close())
	if err != nil {
		os.Remove(s.f.Name())
		return "", fmt.Errorf("localenv: spill %s: %w", s.f.Name(), err)
	}
	return s.f.Name(), nil
}

// createSpill opens a new spill file (mode 0600, as os.CreateTemp makes
// it) in the spill directory, creating the directory on first use.
func (e *Env) createSpill() (*os.File, error) {
	dir, err := e.spillDirReady()
	if err != nil {
		return nil, err
	}
	return os.CreateTemp(dir, "exec-*.out")
}

func (e *Env) spillDirReady() (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.spillReady {
		return e.spillDir, nil
	}
	if e.spillDir == "" {
		d, err := os.MkdirTemp("", "localenv-spill-") // mode 0700
		if err != nil {
			return "", err
		}
		e.spillDir = d
	} else if err := os.MkdirAll(e.spillDir, dirMode); err != nil {
		return "", err
	}
	e.spillReady = true
	return e.spillDir, nil
}
