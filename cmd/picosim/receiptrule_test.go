package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pico-go/pico/core/agent"
)

// A request id accepted twice, refused naming another receipt, or refused
// as accepted though never tried, breaks the rule; refused after an
// uncertain failure, it does not.
func TestTheReceiptRuleBreaksAtASecondAcceptance(t *testing.T) {
	ctx := context.Background()
	first := agent.Receipt{RequestID: "r1", ConversationID: 1, InputID: 5}
	for name, tc := range map[string]struct {
		r   receipts
		err error
	}{
		"accepted again": {r: receipts{known: map[string]agent.Receipt{"r1": first}, uncertain: map[string]bool{}}},
		"refused naming another": {r: receipts{known: map[string]agent.Receipt{"r1": first}, uncertain: map[string]bool{}},
			err: &agent.RequestAlreadyAcceptedError{First: agent.Receipt{RequestID: "r1", ConversationID: 1, InputID: 6}}},
		"refused, never tried": {err: &agent.RequestAlreadyAcceptedError{First: first}},
	} {
		e := &env{oracle: newOracle()}
		var oe *oracleError
		if err := tc.r.accepted(ctx, e, "r1", 1, 9, tc.err); !errors.As(err, &oe) || oe.Rule != ruleReceipt {
			t.Errorf("%s: %v; want a %s violation", name, err, ruleReceipt)
		}
	}
	var r receipts
	e := &env{oracle: newOracle()}
	if err := r.accepted(ctx, e, "r1", 1, 0, errors.New("the process stopped")); err != nil || !r.uncertain["r1"] {
		t.Fatalf("an uncertain failure: %v, %+v", err, r)
	}
}

// A program that accepts under one request id twice, in the same
// conversation and in a fork, across a restart, is refused both times,
// naming the first receipt, which Acceptance recovers, on every backend.
func TestARequestIDIsAcceptedOnceAcrossRestarts(t *testing.T) {
	p, err := parseProgram(programMagic + `
swarm tail=2 shell=false
respond text "one"
respond text "two"
accept c0 "first" req=r1
drive c0
reopen
accept c0 "again" req=r1
fork c0 1
accept c1 "in the fork" req=r1
accept c1 "another" req=r2
drive c0
`)
	if err != nil {
		t.Fatal(err)
	}
	for backend, trace := range runOnEveryBackend(t, p, 3) {
		if n := strings.Count(trace, `request \"r1\" was already accepted`); n != 2 {
			t.Errorf("%s: %d refusals of r1; want 2", backend, n)
		}
	}
}
