package main

import (
	"context"
	"errors"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// ruleReceipt: a request id is accepted once (§9.1): the first acceptance
// under it makes its input, and every later one, across restarts, is
// refused naming that first receipt and makes nothing; a refusal of an id
// the host never saw accepted is right only after an acceptance under it
// failed as the process stopped (an uncertain reply, which may have
// committed). Acceptance(id) recovers the receipt once it is known.
const ruleReceipt oracleRule = "a-request-is-accepted-once"

// receipts is what a program's host knows of its request ids: the receipt
// of each it saw accepted, and those whose acceptance failed, uncertain.
type receipts struct {
	known     map[string]agent.Receipt
	uncertain map[string]bool
}

// accepted holds an acceptance under request id req in conversation conv
// to the rule: it returned input id or err.
func (r *receipts) accepted(ctx context.Context, e *env, req string, conv, id storage.ID, err error) error {
	if r.known == nil {
		r.known, r.uncertain = map[string]agent.Receipt{}, map[string]bool{}
	}
	first, seen := r.known[req]
	var dup *agent.RequestAlreadyAcceptedError
	switch {
	case err == nil && seen:
		return e.oracle.fail(broke(ruleReceipt, "request %q, accepted as input %d of conversation %d, was accepted again as input %d of conversation %d",
			req, first.InputID, first.ConversationID, id, conv))
	case err == nil:
		r.known[req] = agent.Receipt{RequestID: req, ConversationID: conv, InputID: id}
	case errors.As(err, &dup) && seen && dup.First != first:
		return e.oracle.fail(broke(ruleReceipt, "a second acceptance of request %q was refused naming %+v; it was accepted as %+v", req, dup.First, first))
	case errors.As(err, &dup) && !seen && !r.uncertain[req]:
		return e.oracle.fail(broke(ruleReceipt, "an acceptance of request %q was refused as already accepted (%+v), though none under it was ever tried", req, dup.First))
	case errors.As(err, &dup):
		r.known[req] = dup.First
	default:
		r.uncertain[req] = true
		return nil
	}
	want := r.known[req]
	got, ok, rerr := e.h.Acceptance(ctx, req)
	if rerr != nil {
		return nil // the session's own failure, which the run reports
	}
	if !ok || got != want {
		return e.oracle.fail(broke(ruleReceipt, "Acceptance(%q) = %+v, %v; the request was accepted as %+v", req, got, ok, want))
	}
	return nil
}

// crossRequestSeeds is how often a drawn program repeats a request id in
// another conversation: every sixth seed from 5, not the golden traces'
// seed 1.
const crossRequestSeeds = 6

// drawCrossRequests has such a program begin by spawning a child of the
// root and accepting input under one request id in the root and then in
// the child: the id is the session's, so the second is refused naming the
// first (ruleReceipt). The random programs' duplicates mostly land in the
// one conversation they have.
func drawCrossRequests(p *program, seed uint64) {
	if seed%crossRequestSeeds != 5 {
		return
	}
	rng := seededRNG(seed, "cross requests")
	first, second := "c0", "c-1"
	if rng.IntN(2) == 0 {
		first, second = second, first
	}
	p.lines = append([]progLine{
		{op: "respond", args: []string{"text", "ok"}}, {op: "respond", args: []string{"text", "ok"}}, // the child's turn and the root's
		{op: "spawn", args: []string{"c0", "look"}},
		{op: "accept", args: []string{first, "look", "req=rx"}},
		{op: "accept", args: []string{second, "again", "req=rx"}},
	}, p.lines...)
}
