package main

import (
	"errors"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/storage"
)

// A Drive that returns idle passes when its conversation was idle at some
// commit since it began (at its start, or after its foreground task
// settled) and breaks the rule when a foreground task of its own was live
// throughout; background tasks and other conversations' tasks do not keep
// it busy, and a Drive that ended otherwise is not judged.
func TestADriveReturnsIdleOnlyWhenItsConversationWasIdle(t *testing.T) {
	setup := func() *oracle {
		o := newOracle()
		o.kinds = map[storage.ID]string{10: "generation", 11: "job", 12: "generation"}
		o.convs = map[storage.ID]storage.ID{10: 1, 11: 1, 12: 2}
		o.background = map[storage.ID]bool{11: true}
		return o
	}
	broken := func(err error) bool {
		var oe *oracleError
		return errors.As(err, &oe) && oe.Rule == ruleDriveIdle
	}

	o := setup()
	w := o.watchIdle(1)
	if err := o.droveIdle(w, core.Idle, nil); !broken(err) {
		t.Fatalf("idle while task 10 ran throughout: %v; want a %s violation", err, ruleDriveIdle)
	}

	o = setup()
	w = o.watchIdle(1)
	o.settled[10] = true
	o.idleSeen()
	o.settled[10] = false // busy again by the time the Drive returns
	if err := o.droveIdle(w, core.Idle, nil); err != nil {
		t.Fatalf("idle after task 10 settled: %v", err)
	}
	if len(o.idleWatches) != 0 {
		t.Fatalf("%d watches left after the Drive returned", len(o.idleWatches))
	}

	o = setup()
	if err := o.droveIdle(o.watchIdle(2), core.Closed, nil); err != nil {
		t.Fatalf("a Drive the session's close ended: %v", err)
	}
	o.settled[10] = true
	if err := o.droveIdle(o.watchIdle(1), core.Idle, nil); err != nil {
		t.Fatalf("conversation 1 with only a background job: %v", err)
	}
}
