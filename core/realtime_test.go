package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
)

// A real sleep of nothing returns at once, nil, or its context's error
// when the context is done: it makes no timer to wait for.
func TestARealSleepOfNothingReturnsItsContextsError(t *testing.T) {
	rt := core.RealRuntime()
	for _, d := range []int64{0, -5} {
		if err := rt.Sleep(context.Background(), time.Duration(d)); err != nil {
			t.Errorf("Sleep(%d) = %v; want nil", d, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := rt.Sleep(ctx, time.Duration(d)); !errors.Is(err, context.Canceled) {
			t.Errorf("Sleep(%d) with a cancelled context = %v; want context.Canceled", d, err)
		}
	}
}
