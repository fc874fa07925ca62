package main

import (
	"context"
	"errors"
	"testing"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
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

// CancelQueued's answer is held to what the history shows once it
// returned: cancelled means withdrawn with its result cancelled by
// request, not found means not queued and not withdrawn by this call.
func TestCancelQueuedSaysWhatItDid(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	result := func(st agent.InputStatus, reason string) []byte {
		return []byte(`{"status":"` + string(st) + `","reason":"` + reason + `"}`)
	}
	addr := func(input string) *storage.Address {
		a := agent.InputResultValue.In(1).WithKey(input).Address
		return &a
	}
	if _, err := store.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		{Type: storage.WriteValueSet, Addr: addr("5"), Value: result(agent.InputCancelled, agent.ReasonCancelledByRequest)},
		{Type: storage.WriteValueSet, Addr: addr("6"), Value: result(agent.InputQueued, "")},
		{Type: storage.WriteValueSet, Addr: addr("7"), Value: result(agent.InputCancelled, agent.ReasonConversationAborted)},
	}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		input     storage.ID
		res       agent.CancelResult
		withdrawn bool
		broken    bool
	}{
		{"a withdrawn input", 5, agent.Cancelled, false, false},
		{"a second cancel of it", 5, agent.NotFound, true, false},
		{"a withdrawal said as nothing found", 5, agent.NotFound, false, true},
		{"a queued input said as nothing found", 6, agent.NotFound, false, true},
		{"a queued input said as cancelled", 6, agent.Cancelled, false, true},
		{"an abort's cancel said as a withdrawal", 7, agent.Cancelled, false, true},
		{"an abort's cancel found as nothing", 7, agent.NotFound, false, false},
	} {
		o := newOracle()
		o.queued[6] = 1
		o.withdrawn[5] = c.withdrawn
		err := o.cancelledQueued(ctx, store, 1, c.input, c.res)
		var oe *oracleError
		if broken := errors.As(err, &oe) && oe.Rule == ruleCancelQueued; broken != c.broken || !c.broken && err != nil {
			t.Errorf("%s: %v; want broken %v", c.name, err, c.broken)
		}
	}
}
