package clock

import (
	"container/heap"
	"time"
)

// Epoch is where virtual time starts: a fixed instant, so that runs with the
// same seed see the same times.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock holds virtual time and the pending timers. It is not safe for
// concurrent use; the scheduler owns it.
type Clock struct {
	now    time.Time
	timers timerHeap
	seq    uint64
}

// New returns a clock at Epoch.
func New() *Clock { return &Clock{now: Epoch} }

// Now is the current virtual time.
func (c *Clock) Now() time.Time { return c.now }

// Timer is one pending deadline.
type Timer struct {
	When  time.Time
	seq   uint64 // creation order breaks ties deterministically
	index int    // position in the heap; -1 once fired or stopped
	fired bool
}

// Fired reports whether the timer's deadline has been reached.
func (t *Timer) Fired() bool { return t.fired }

// After returns a timer that fires d from now. A non-positive d fires at the
// next advance without moving time.
func (c *Clock) After(d time.Duration) *Timer {
	if d < 0 {
		d = 0
	}
	c.seq++
	t := &Timer{When: c.now.Add(d), seq: c.seq}
	heap.Push(&c.timers, t)
	return t
}

// Stop removes a pending timer; it reports whether the timer was pending.
func (c *Clock) Stop(t *Timer) bool {
	if t.index < 0 || t.fired {
		return false
	}
	heap.Remove(&c.timers, t.index)
	t.index = -1
	return true
}

// Pending reports whether any timer is waiting.
func (c *Clock) Pending() bool { return len(c.timers) > 0 }

// Advance moves time to the earliest pending deadline (never backwards) and
// fires every timer due then. It returns the fired timers in deadline, then
// creation, order.
func (c *Clock) Advance() []*Timer {
	if len(c.timers) == 0 {
		return nil
	}
	if next := c.timers[0].When; next.After(c.now) {
		c.now = next
	}
	var fired []*Timer
	for len(c.timers) > 0 && !c.timers[0].When.After(c.now) {
		t := heap.Pop(&c.timers).(*Timer)
		t.fired, t.index = true, -1
		fired = append(fired, t)
	}
	return fired
}

type timerHeap []*Timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].When.Equal(h[j].When) {
		return h[i].When.Before(h[j].When)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*Timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
