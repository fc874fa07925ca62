package main

import (
	"context"
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

// ruleCancelQueued: CancelQueued says what it did (§8.1). Cancelled: the
// input has left its inbox with its result cancelled by request. Not
// found: the input is not queued (one that landed or ended never queues
// again), and if its result says cancelled by request, an earlier
// CancelQueued said it withdrew it (only the host's cancels give that
// reason).
const ruleCancelQueued oracleRule = "cancel-withdraws-queued-input"

// cancelledQueued holds a CancelQueued of input in conv, which returned
// res, to ruleCancelQueued, against what the history shows once it
// returned.
func (o *oracle) cancelledQueued(ctx context.Context, store storage.Storage, conv, input storage.ID, res agent.CancelResult) error {
	_, queued := o.queued[input]
	results, err := inputResults(ctx, store, conv)
	if err != nil {
		return err
	}
	r := results[input]
	byRequest := r.Status == agent.InputCancelled && r.Reason == agent.ReasonCancelledByRequest
	switch {
	case res == agent.NotFound && queued:
		return o.fail(broke(ruleCancelQueued, "CancelQueued of input %d in conversation %d found nothing, though the input is queued", input, conv))
	case res == agent.NotFound && byRequest && !o.withdrawn[input]:
		return o.fail(broke(ruleCancelQueued, "CancelQueued of input %d in conversation %d found nothing, but the input's result says it was cancelled by request, and no CancelQueued said it withdrew it: %+v", input, conv, r))
	case res == agent.Cancelled && (queued || !byRequest):
		return o.fail(broke(ruleCancelQueued, "CancelQueued of input %d in conversation %d cancelled it, but it is queued: %v, its result %+v", input, conv, queued, r))
	case res != agent.NotFound && res != agent.Cancelled:
		return o.fail(broke(ruleCancelQueued, "CancelQueued of input %d in conversation %d returned %q", input, conv, res))
	}
	if res == agent.Cancelled {
		o.withdrawn[input] = true
	}
	return nil
}

// failedWriteSeeds is how often a drawn program queues a write behind a
// turn that fails: every sixth seed from 4, not the golden traces' seed 1.
const failedWriteSeeds = 6

// drawFailedTurnWrites has such a program begin with a turn of the root
// whose model is rate-limited until its retries run out, and a write
// queued while it waits to retry: the failed turn's end is the boundary
// that places the write (§5.4), and nothing may keep it queued for a later
// one. Random programs rarely queue a write under a turn that then fails.
func drawFailedTurnWrites(p *program, seed uint64) {
	if seed%failedWriteSeeds != 4 {
		return
	}
	rng := seededRNG(seed, "failed turn writes")
	block := []progLine{{op: "respond", args: []string{"rate-limited"}}, {op: "respond", args: []string{"rate-limited"}}, {op: "respond", args: []string{"rate-limited"}},
		{op: "accept", args: []string{"c0", "look"}}, {op: "drive-async", args: []string{"c0"}}, {op: "sleep", args: []string{"1"}}}
	for range 1 + rng.IntN(2) {
		block = append(block, progLine{op: "write", args: []string{"c0", []string{"note", "fix it"}[rng.IntN(2)]}})
	}
	p.lines = append(append(block, progLine{op: "drive", args: []string{"c0"}}), p.lines...)
}
