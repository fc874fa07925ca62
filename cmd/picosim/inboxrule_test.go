package main

import (
	"testing"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// A commit that lands queued input lands every input of each mode it lands
// that was queued before it, in acceptance order; input queued in another
// conversation, of another mode or after the commit is not its to land.
func TestQueuedInputLandsByModeInOrder(t *testing.T) {
	// Conversation 1 has followUps 10 and 12 and a steer 11 queued,
	// conversation 2 a followUp 13.
	queued := map[storage.ID]storage.ID{10: 1, 11: 1, 12: 1, 13: 2}
	modes := map[storage.ID]agent.InputMode{10: agent.ModeFollowUp, 11: agent.ModeSteer, 12: agent.ModeFollowUp, 13: agent.ModeFollowUp}
	cases := []struct {
		name   string
		placed []placedInput
		broken bool
	}{
		{name: "every followUp in order", placed: []placedInput{{10, 1, 20}, {12, 1, 21}}},
		{name: "the steer alone", placed: []placedInput{{11, 1, 20}}},
		{name: "all of them, the steer between", placed: []placedInput{{10, 1, 20}, {11, 1, 21}, {12, 1, 22}}},
		{name: "an input accepted in the commit", placed: []placedInput{{30, 1, 20}}},
		{name: "one followUp of two", placed: []placedInput{{10, 1, 20}}, broken: true},
		{name: "the later followUp alone", placed: []placedInput{{12, 1, 20}}, broken: true},
		{name: "followUps out of order", placed: []placedInput{{10, 1, 21}, {12, 1, 20}}, broken: true},
		{name: "another conversation's", placed: []placedInput{{13, 2, 20}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			for in, conv := range queued {
				o.queued[in], o.modes[in] = conv, modes[in]
			}
			before := map[storage.ID]storage.ID{}
			for in, conv := range o.queued {
				before[in] = conv
			}
			for _, p := range tc.placed {
				delete(o.queued, p.input) // what the commit's removals did
			}
			holdsOrBreaks(t, o.inboxOrder(before, tc.placed, "a test", storage.Range{First: 20, Last: 22}), ruleInboxOrder, tc.broken)
		})
	}
}
