package localenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pico-go/pico/core/agent"
)

// The file operations resolve their path inside the root (path.go) and then
// act on the resolved path with package os. Their errors wrap the os
// errors, so a missing file is errors.Is(err, fs.ErrNotExist) and a path
// outside the root is an *EscapeError (errors.Is(err, fs.ErrPermission)).
// A ctx already done is an error; once started, an operation runs to its end.

// ReadFile returns the contents of the file at path: inside the root, or
// a spill file of this environment.
func (e *Env) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("localenv: read %s: %w", path, err)
	}
	p, err := e.resolveRead(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("localenv: %w", err)
	}
	return data, nil
}

// WriteFile creates or replaces the file at path with data, creating the
// missing parent directories (mode 0700). A new file has mode 0600; an
// existing one is truncated and rewritten in place, so it keeps its mode.
// A path that is a symlink inside the root writes the file it points to.
func (e *Env) WriteFile(ctx context.Context, path string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localenv: write %s: %w", path, err)
	}
	p, err := e.resolve(path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), dirMode); err != nil {
		return fmt.Errorf("localenv: %w", err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fileMode)
	if err != nil {
		return fmt.Errorf("localenv: %w", err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("localenv: %w", err)
	}
	return nil
}

// Stat reports the resolved absolute path of the file at path and its
// size; like ReadFile it also reaches this environment's spill files.
func (e *Env) Stat(ctx context.Context, path string) (agent.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return agent.FileInfo{}, fmt.Errorf("localenv: stat %s: %w", path, err)
	}
	p, err := e.resolveRead(path)
	if err != nil {
		return agent.FileInfo{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return agent.FileInfo{}, fmt.Errorf("localenv: %w", err)
	}
	return agent.FileInfo{Path: p, Size: fi.Size()}, nil
}
