package proc

import (
	"context"
	"fmt"
	"io/fs"
	"maps"

	"github.com/pico-go/pico/core/agent"
)

// The file system is a flat map from resolved path to contents: there are
// no directories, permissions or modification times, because nothing the
// harness does with files depends on them and each would be one more thing a
// trace must fix. Operations are instantaneous — no scheduling point — and
// ignore ctx: they cannot block, so there is nothing to cancel.
//
// Under the simulated runtime only one actor runs at a time and hand-offs
// go through channels, so the map needs no lock there. Env also works under
// the real runtime, where tool calls may run concurrently, so e.mu guards
// the map anyway; it is held only for the map access itself, never across a
// scheduling point, so under the simulator it is never contended and never
// blocks.

// ReadFile returns a copy of the file's contents. A missing file is an error
// wrapping fs.ErrNotExist that names the path.
func (e *Env) ReadFile(_ context.Context, name string) ([]byte, error) {
	p, err := resolve(name)
	if err != nil {
		return nil, fmt.Errorf("proc: read %q: %w: %w", name, fs.ErrInvalid, err)
	}
	e.mu.Lock()
	data, ok := e.files[p]
	e.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("proc: read %s: %w", p, fs.ErrNotExist)
	}
	return []byte(data), nil
}

// WriteFile creates or replaces the file with a copy of data.
func (e *Env) WriteFile(_ context.Context, name string, data []byte) error {
	p, err := resolve(name)
	if err != nil {
		return fmt.Errorf("proc: write %q: %w: %w", name, fs.ErrInvalid, err)
	}
	e.mu.Lock()
	e.files[p] = string(data) // string conversion copies
	e.mu.Unlock()
	return nil
}

// Stat reports the file's resolved path and size. A missing file is an
// error wrapping fs.ErrNotExist that names the path.
func (e *Env) Stat(_ context.Context, name string) (agent.FileInfo, error) {
	p, err := resolve(name)
	if err != nil {
		return agent.FileInfo{}, fmt.Errorf("proc: stat %q: %w: %w", name, fs.ErrInvalid, err)
	}
	e.mu.Lock()
	data, ok := e.files[p]
	e.mu.Unlock()
	if !ok {
		return agent.FileInfo{}, fmt.Errorf("proc: stat %s: %w", p, fs.ErrNotExist)
	}
	return agent.FileInfo{Path: p, Size: int64(len(data))}, nil
}

// Files returns a copy of every file by resolved path, for assertions.
func (e *Env) Files() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.files)
}
