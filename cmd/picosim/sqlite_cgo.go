//go:build cgo

package main

import (
	"errors"
	"slices"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// errSQLiteUnavailable is nil: this picosim was built with cgo, which the
// SQLite driver needs (sqlite_nocgo.go is the other case).
var errSQLiteUnavailable error

// sqliteEnvironmentCodes are SQLite's ways of saying the machine failed
// it: a full disk, an I/O error, a file it may not write or cannot open in
// the directory picosim made for it.
var sqliteEnvironmentCodes = []sqlite3.ErrNo{sqlite3.ErrFull, sqlite3.ErrIoErr, sqlite3.ErrReadonly, sqlite3.ErrCantOpen, sqlite3.ErrPerm}

// sqliteEnvironment reports whether err is SQLite's report of one of
// sqliteEnvironmentCodes.
func sqliteEnvironment(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && slices.Contains(sqliteEnvironmentCodes, se.Code)
}
