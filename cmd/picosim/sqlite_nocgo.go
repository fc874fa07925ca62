//go:build !cgo

package main

import "errors"

// errSQLiteUnavailable says why the sqlite backend cannot run: without cgo
// (CGO_ENABLED=0, or no C compiler when picosim was built, which makes go
// build without cgo) the SQLite driver is a stub that fails every open.
// Knowing it when picosim is built turns every sqlite run into one
// environment error instead of a failing run per seed.
var errSQLiteUnavailable = errors.New("the sqlite backend needs cgo, and this picosim was built without it (CGO_ENABLED=0 or no C compiler); rebuild it with a C toolchain, or use --backend jsonl")

// sqliteEnvironment reports nothing: no SQLite error can reach here.
func sqliteEnvironment(error) bool { return false }
