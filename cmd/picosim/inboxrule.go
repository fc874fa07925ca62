package main

import (
	"slices"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// ruleInboxOrder: queued input lands by mode, all at once and in the order
// it was accepted (§8.1): a commit that lands an input queued before it
// lands every input of that mode its conversation had queued, and lands
// inputs of one mode in acceptance order, each placement entry after the
// one before.
const ruleInboxOrder oracleRule = "queued-input-lands-in-order"

// placedInput is an input a batch landed: its conversation, and the entry
// that placed it.
type placedInput struct {
	input, conv, entry storage.ID
}

// queuedBefore is what the inboxes held before batch b, when b removes
// from one; nil otherwise.
func (o *oracle) queuedBefore(b storage.CommitBatch) map[storage.ID]storage.ID {
	if !slices.ContainsFunc(b.Writes, func(w storage.Write) bool {
		return w.Type == storage.WriteListRemove && w.Addr != nil && w.Addr.Namespace == agent.InboxList.Namespace
	}) {
		return nil
	}
	before := make(map[storage.ID]storage.ID, len(o.queued))
	for in, conv := range o.queued {
		before[in] = conv
	}
	return before
}

// inboxOrder holds what batch b landed of the inputs queued before it to
// the rule.
func (o *oracle) inboxOrder(before map[storage.ID]storage.ID, placed []placedInput, by string, r storage.Range) error {
	landed := map[storage.ID]bool{}
	var fromQueue []placedInput
	for _, p := range placed {
		if before[p.input] == p.conv {
			landed[p.input] = true
			fromQueue = append(fromQueue, p)
		}
	}
	slices.SortFunc(fromQueue, func(a, b placedInput) int { return int(a.input - b.input) })
	for i, p := range fromQueue {
		mode := o.modes[p.input]
		for in, conv := range before {
			if conv == p.conv && o.modes[in] == mode && !landed[in] && o.queued[in] == conv {
				return o.fail(broke(ruleInboxOrder, "%s landed %s input %d of conversation %d at %d–%d and left %s input %d, queued before it, queued",
					by, mode, p.input, p.conv, r.First, r.Last, mode, in))
			}
		}
		for _, q := range fromQueue[:i] {
			if q.conv == p.conv && o.modes[q.input] == mode && q.entry > p.entry {
				return o.fail(broke(ruleInboxOrder, "%s landed %s inputs %d and %d of conversation %d at %d–%d with entries %d and %d, out of acceptance order",
					by, mode, q.input, p.input, p.conv, r.First, r.Last, q.entry, p.entry))
			}
		}
	}
	return nil
}
