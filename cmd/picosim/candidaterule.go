package main

import (
	"context"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// The candidate rule (pico-v3.md §8.4): a collapse whose summarizer
// answered keeps the summary in its scratch (its candidate) before it
// publishes; a crash in between must not cost the answer. A collapse
// recovered with its candidate durable publishes it: its recover neither
// goes back to wait for another summarizer call (retry_wait) nor settles
// interrupted. The oracle follows each collapse's candidate from its
// scratch batches, and after a restart from the store.

// ruleCandidate: a recovered collapse publishes its durable candidate.
const ruleCandidate oracleRule = "a-recovered-collapse-publishes-its-candidate"

// candidateSeen follows a scratch batch's candidate writes, and holds a
// collapse's recover that committed b to the rule.
func (o *oracle) candidateSeen(inv core.Invocation, ok bool, b storage.CommitBatch, by string, r storage.Range) error {
	if b.Kind == storage.BatchScratch {
		for _, w := range b.Writes {
			if w.Addr != nil && w.Addr.Namespace == agent.CollapseCandidateAddress.Namespace {
				o.candidates[b.Task] = w.Type == storage.WriteValueSet
			}
		}
		return nil
	}
	if !ok || inv.Method != core.MethodRecover || o.kinds[inv.Task] != agent.CollapseKindName || !o.candidates[inv.Task] {
		return nil
	}
	for i, w := range b.Writes {
		if w.ID != inv.Task || !(w.Type == storage.WritePatch && w.Status == "retry_wait" || w.Type == storage.WriteSettle && w.Status == agent.CollapseInterrupted) {
			continue
		}
		return o.fail(broke(ruleCandidate, "%s %s collapse %d %s at %d, though its candidate summary was durable in its scratch",
			by, map[storage.WriteType]string{storage.WritePatch: "patched", storage.WriteSettle: "settled"}[w.Type], w.ID, w.Status, r.First+storage.ID(i)))
	}
	return nil
}

// resyncCandidates reads each live collapse's candidate from the store,
// where a restart left it (a commit the oracle never saw may have written
// or deleted it).
func (o *oracle) resyncCandidates(ctx context.Context, store storage.Storage, tasks []*storage.Task) error {
	clear(o.candidates)
	for _, t := range tasks {
		if t.Kind != agent.CollapseKindName || !t.Live() {
			continue
		}
		a := agent.CollapseCandidateAddress
		a.Scope.ID = t.ID
		_, found, err := store.GetValue(ctx, a, 0)
		if err != nil {
			return err
		}
		o.candidates[t.ID] = found
	}
	return nil
}
