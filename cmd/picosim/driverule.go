package main

import (
	"slices"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/storage"
)

// ruleDriveIdle: a Drive of a conversation returns idle only if, at some
// commit since it began, the conversation had no live foreground task of
// its own (core.Conversation.Drive; what it owns is busy only while an
// owner of its own runs, which keeps it busy too).
const ruleDriveIdle oracleRule = "a-drive-returns-idle-only-when-idle"

// idleWatch follows one Drive of a conversation: whether the conversation
// has been idle since the Drive began, and if not, what kept it busy last.
type idleWatch struct {
	conv    storage.ID
	sawIdle bool
	busy    []storage.ID
}

// foregroundOf are conv's live foreground tasks as the oracle has followed
// the history, ascending.
func (o *oracle) foregroundOf(conv storage.ID) []storage.ID {
	var out []storage.ID
	for t, c := range o.convs {
		if c == conv && !o.settled[t] && !o.background[t] {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// watchIdle starts following a Drive of conv about to begin.
func (o *oracle) watchIdle(conv storage.ID) *idleWatch {
	w := &idleWatch{conv: conv}
	o.idleWatches = append(o.idleWatches, w)
	o.noteIdle(w)
	return w
}

func (o *oracle) noteIdle(w *idleWatch) {
	if w.sawIdle {
		return
	}
	w.busy = o.foregroundOf(w.conv)
	w.sawIdle = len(w.busy) == 0
}

// idleSeen takes in a commit, or a restart's resync, for every Drive under
// way.
func (o *oracle) idleSeen() {
	for _, w := range o.idleWatches {
		o.noteIdle(w)
	}
}

// droveIdle holds the Drive w followed, which returned r and err, to
// ruleDriveIdle, and stops following it.
func (o *oracle) droveIdle(w *idleWatch, r core.DriveResult, err error) error {
	o.idleWatches = slices.DeleteFunc(o.idleWatches, func(x *idleWatch) bool { return x == w })
	if r != core.Idle || err != nil || w.sawIdle {
		return nil
	}
	return o.fail(broke(ruleDriveIdle, "a Drive of conversation %d returned idle, but since it began the conversation always had a live foreground task (last: %v)", w.conv, w.busy))
}
