package localenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// symlinkHopsMax bounds the dangling symlinks resolve follows by hand, as
// the kernel bounds a path's links (ELOOP), so that a cycle of them ends.
const symlinkHopsMax = 40

// EscapeError is a path that leads outside the root, by ".." or through a
// symlink. It wraps fs.ErrPermission: the file may exist, but it is not the
// environment's to touch.
type EscapeError struct {
	Path string // as the caller gave it
	Root string
}

func (e *EscapeError) Error() string {
	return fmt.Sprintf("localenv: %s escapes the root %s", e.Path, e.Root)
}

func (e *EscapeError) Unwrap() error { return fs.ErrPermission }

// resolve turns a path as a caller gives it (relative to the root, or
// absolute) into the absolute, symlink-free path it names, and refuses one
// outside the root with an *EscapeError.
//
// The path need not exist: the longest prefix that does is resolved with
// filepath.EvalSymlinks and the rest appended, so a file about to be
// created is judged by the directory it will be created in. ".." is applied
// lexically first (as filepath.Clean does), and the file operations then
// use the resolved path, so what was checked is what is opened.
//
// The check is made once, at resolution; a process renaming directories at
// that instant could still race it. That is not the threat: a command run
// through Exec can touch any file the user can. Confinement keeps the file
// tools from straying outside the root by a mistaken path or a symlink.
func (e *Env) resolve(name string) (string, error) {
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(e.root, p)
	}
	real, err := evalExisting(filepath.Clean(p), symlinkHopsMax)
	if err != nil {
		return "", fmt.Errorf("localenv: resolve %s: %w", name, err)
	}
	if !within(e.root, real) {
		return "", &EscapeError{Path: name, Root: e.root}
	}
	return real, nil
}

// resolveRead is resolve for reading: besides the root, the environment's
// own spill directory is readable, so that the file tools can open the
// spill path a truncation diagnostic names.
func (e *Env) resolveRead(name string) (string, error) {
	p, err := e.resolve(name)
	var esc *EscapeError
	if !errors.As(err, &esc) {
		return p, err
	}
	e.mu.Lock()
	dir, ready := e.spillDir, e.spillReady
	e.mu.Unlock()
	if !ready || !filepath.IsAbs(name) {
		return "", err
	}
	real, rerr := evalExisting(filepath.Clean(name), symlinkHopsMax)
	if rerr != nil || !within(dir, real) {
		return "", err
	}
	return real, nil
}

// evalExisting resolves the symlinks of the longest existing prefix of the
// clean absolute path p and appends the rest. A dangling symlink on the way
// is followed by hand (its target need not exist either, but it is where a
// write would land), at most hops times.
func evalExisting(p string, hops int) (string, error) {
	rest := "" // the components under dir that do not exist
	for dir := p; ; {
		r, err := filepath.EvalSymlinks(dir)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if hops == 0 {
				return "", &fs.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
			}
			target, err := os.Readlink(dir)
			if err != nil {
				return "", err
			}
			if !filepath.IsAbs(target) {
				// Relative to the link's directory, which exists (Lstat
				// found the link in it) and so resolves: ".." in the
				// target must climb from the real directory, not the
				// lexical one.
				parent, err := filepath.EvalSymlinks(filepath.Dir(dir))
				if err != nil {
					return "", err
				}
				target = filepath.Join(parent, target)
			}
			return evalExisting(filepath.Join(filepath.Clean(target), rest), hops-1)
		}
		parent := filepath.Dir(dir)
		if parent == dir { // the file system root does not exist: cannot happen
			return filepath.Join(dir, rest), nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// within reports whether p is root or lies under it; both are absolute and
// clean.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && filepath.IsLocal(rel)
}
