package core_test

import (
	"context"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// must is simtest.Must, short for the many calls.
func must[T any](v T, err error) T { return simtest.Must(v, err) }

func open(t testing.TB, ctx context.Context, s *sim.Sim, store storage.Storage, kinds ...core.TaskKind) *core.Harness {
	t.Helper()
	if store == nil {
		store = memory.New()
	}
	h, err := core.Open(ctx, store, core.Options{Runtime: s.Runtime(), TaskKinds: kinds, CheckInvariants: true, CheckPreviews: true})
	if err != nil {
		t.Fatal(err)
	}
	return h
}
