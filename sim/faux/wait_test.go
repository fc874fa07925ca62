package faux

import (
	"context"
	"testing"
)

// The real runtime waits on Done; the simulator polls Err. Both must see
// either parent's cancellation, and agree with each other.
func TestEitherCtxIsDoneWhenEitherParentIs(t *testing.T) {
	type key struct{}
	for _, cancelFirst := range []bool{true, false} {
		primary, cancelPrimary := context.WithCancel(context.WithValue(context.Background(), key{}, "actor"))
		other, cancelOther := context.WithCancel(context.Background())
		w := either(primary, other)
		done := w.Done()
		if w.Err() != nil {
			t.Fatal("Err before any cancellation")
		}
		if cancelFirst {
			cancelPrimary()
		} else {
			cancelOther()
		}
		<-done // a goroutine-free Err poll would not get here without AfterFunc
		if w.Err() != context.Canceled {
			t.Fatalf("Err = %v after a parent was cancelled; want context.Canceled", w.Err())
		}
		if w.Value(key{}) != "actor" {
			t.Fatal("values of the primary are lost")
		}
		w.release()
		cancelPrimary()
		cancelOther()
	}
}

// Under the simulator nobody calls Done: Err alone must notice.
func TestEitherCtxErrSeesCancellationWithoutDone(t *testing.T) {
	other, cancel := context.WithCancel(context.Background())
	w := either(context.Background(), other)
	cancel()
	if w.Err() != context.Canceled {
		t.Fatalf("Err = %v; want context.Canceled", w.Err())
	}
	select {
	case <-w.Done():
	default:
		t.Fatal("Done is open although Err reported cancellation")
	}
}
