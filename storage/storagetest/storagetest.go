package storagetest

import (
	"context"
	"testing"

	"github.com/pico-go/pico/storage"
)

type ID = storage.ID

// Opener returns a fresh, empty store. The suite closes every store it opens
// when the test (or the property check) that opened it ends; an opener may
// also register its own cleanup, and a second Close is ignored.
type Opener = func(t *testing.T) storage.Storage

// Run runs the whole suite against the backend that open returns.
func Run(t *testing.T, open func(t *testing.T) storage.Storage) {
	t.Helper()
	groups := []struct {
		name  string
		tests []test
	}{
		{"Commit", commitTests},
		{"Reject", []test{{"EveryRuleRejectsAndLeavesTheStoreUnchanged", testRejections}}},
		{"Query", queryTests},
		{"State", stateTests},
		{"Fork", forkTests},
		{"Scratch", scratchTests},
		{"Property", []test{{"RandomHistoriesWithForksMatchTheModel", testProperty}}},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
			}
		})
	}
}

// test is one named specification of the suite.
type test struct {
	name string
	fn   func(t *testing.T, open Opener)
}

// tb is what the suite's helpers need from *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// store is a backend under test plus the test that fails when a helper's
// call fails. Helpers named after a read fail the test on an error; tests
// that expect an error call the embedded Storage directly.
type store struct {
	storage.Storage
	t   tb
	ctx context.Context
}

// newStore opens a fresh store for t and closes it when t ends.
func newStore(t *testing.T, open Opener) *store {
	t.Helper()
	s := open(t)
	if s == nil {
		t.Fatalf("open returned a nil store")
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	if got := s.LastSeq(); got != 0 {
		t.Fatalf("fresh store: LastSeq() = %d; want 0", got)
	}
	return &store{Storage: s, t: t, ctx: t.Context()}
}
