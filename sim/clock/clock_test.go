package clock

import (
	"testing"
	"time"
)

func TestAdvanceFiresDueTimersInDeadlineThenCreationOrder(t *testing.T) {
	c := New()
	late := c.After(2 * time.Second)
	a := c.After(time.Second)
	b := c.After(time.Second)
	stopped := c.After(time.Second)
	if !c.Stop(stopped) || c.Stop(stopped) {
		t.Fatal("Stop of a pending timer must report true once, then false")
	}
	fired := c.Advance()
	if len(fired) != 2 || fired[0] != a || fired[1] != b {
		t.Fatalf("first advance fired %v; want a then b", fired)
	}
	if got := c.Now().Sub(Epoch); got != time.Second {
		t.Fatalf("now = epoch+%v; want +1s", got)
	}
	if late.Fired() || stopped.Fired() {
		t.Fatal("a later or stopped timer fired early")
	}
	if fired := c.Advance(); len(fired) != 1 || fired[0] != late || c.Now().Sub(Epoch) != 2*time.Second {
		t.Fatalf("second advance fired %v at %v; want late at +2s", fired, c.Now().Sub(Epoch))
	}
	if c.Pending() || c.Advance() != nil {
		t.Fatal("no timers should remain")
	}
}

func TestZeroAndNegativeDelaysFireWithoutMovingTime(t *testing.T) {
	c := New()
	c.After(-time.Second)
	c.After(0)
	if fired := c.Advance(); len(fired) != 2 || !c.Now().Equal(Epoch) {
		t.Fatalf("fired %d at %v; want 2 at the epoch", len(fired), c.Now())
	}
}
