package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/boundary"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
)

// The provider-boundary scenario (DESIGN §11): a Claude clear arrives
// while the root answers, and again (a repeated delivery). Its host
// actions are "startup", "clear" and "repeat clear".

// deliver is the host action of delivering a Claude SessionStart of the
// given source for provider session id: parsed, classified against the
// launch's adapter state, applied. It reports the transition and whether
// it happened (false when --drop names it).
func (e *env) deliver(ctx context.Context, action, source, id string) (boundary.Transition, bool, error) {
	return e.deliverFrom(ctx, &e.adapter, action, source, id)
}

// deliverFrom is deliver classifying against st, the adapter state of
// whichever hook process delivers (a second handler keeps its own).
func (e *env) deliverFrom(ctx context.Context, st *boundary.State, action, source, id string) (boundary.Transition, bool, error) {
	if action != "" && !e.host(action) {
		return boundary.Transition{}, false, nil
	}
	return e.deliverEvent(ctx, st, boundary.Claude, boundary.EventSessionStart, source, id)
}

// adapterOf is the adapter state of provider p's launch: Claude's is the
// launch's own (e.adapter), the others' are kept beside it.
func (e *env) adapterOf(p boundary.Provider) *boundary.State {
	if p == boundary.Claude {
		return &e.adapter
	}
	if e.adapters == nil {
		e.adapters = map[boundary.Provider]*boundary.State{}
	}
	if e.adapters[p] == nil {
		e.adapters[p] = &boundary.State{}
	}
	return e.adapters[p]
}

// deliverEvent delivers provider p's lifecycle event of the given name
// with source as its source, reason or trigger, for provider session id,
// as p's hook would: parsed, classified against st under p's default
// policy, applied; st moves on when it applied.
func (e *env) deliverEvent(ctx context.Context, st *boundary.State, p boundary.Provider, event, source, id string) (boundary.Transition, bool, error) {
	fields := map[string]string{"session_id": id, "transcript_path": "/home/u/.agent/p/" + id + ".jsonl", "cwd": "/home/u/p", "hook_event_name": event}
	switch event {
	case boundary.EventSessionEnd:
		fields["reason"] = source
	case boundary.EventPreCompact, boundary.EventPostCompact, boundary.EventPreCompress:
		fields["trigger"] = source
	default:
		fields["source"] = source
	}
	if p == boundary.Copilot {
		delete(fields, "hook_event_name") // its camelCase payload names no event: always a start
	}
	payload, _ := json.Marshal(fields)
	ev, err := boundary.Parse(p, payload)
	if err != nil {
		return boundary.Transition{}, true, err
	}
	b, next, err := boundary.Classify(*st, ev, boundary.DefaultPolicy(p))
	if err != nil {
		return boundary.Transition{}, true, err
	}
	tr, err := boundary.Apply(ctx, e.h.Harness, b)
	if err == nil {
		*st = next
	}
	return tr, true, err
}

// providerClear: the launch binds at startup; a long turn streams; the
// provider's clear lands: one commit stops the root and marks its work, a
// new conversation with its provider_boundary entry becomes current; the
// repeat of the clear changes nothing; the next turn runs in the new
// conversation, and the old one keeps its entries.
func providerClear(ctx context.Context, e *env) error {
	if _, _, err := e.deliver(ctx, "startup", "startup", "thread-1"); err != nil {
		return err
	}
	e.faux.SetResponses(reply("a long answer").WithDelay(time.Duration(1+e.s.Rand().IntN(3000))*time.Millisecond), reply("fresh start"))
	first, err := e.accept(ctx, root, agent.ModeFollowUp, "explain everything")
	if err != nil {
		return err
	}
	done := e.driveAsync(ctx, root)
	if err := e.s.Runtime().Sleep(ctx, time.Duration(e.s.Rand().IntN(2000))*time.Millisecond); err != nil {
		return err
	}
	// A second hook handler delivers the same clear from its own adapter
	// state, which has not seen it: the session's binding makes it a no-op.
	other := e.adapter
	tr, cleared, err := e.deliver(ctx, "clear", "clear", "thread-2")
	if err != nil {
		return err
	}
	done.Wait(ctx)
	if err := e.expectEnded(ctx, root, first); err != nil {
		return err
	}
	again, repeated, err := e.deliverFrom(ctx, &other, "repeat clear", "clear", "thread-2")
	if err != nil {
		return err
	}
	if cleared && repeated && (again.Changed || again.Binding != tr.Binding) {
		return fmt.Errorf("the repeated clear = %+v; want the first's binding %+v and no change", again, tr.Binding)
	}
	current, err := boundary.Current(ctx, e.h.Harness)
	if err != nil {
		return err
	}
	if cleared && (current == root || current != tr.Binding.Conversation) {
		return fmt.Errorf("current conversation %d after the clear; want the new one %d", current, tr.Binding.Conversation)
	}
	if err := e.turnIn(ctx, current, "what now"); err != nil {
		return err
	}
	page, err := e.h.Entries(ctx, root, storage.Cursor{Limit: 10})
	if err != nil || len(page.Items) == 0 {
		return fmt.Errorf("the old conversation's entries after the clear: %v (%d); nothing is deleted", err, len(page.Items))
	}
	return e.settled(ctx, nil)
}

// expectEnded checks that input ended, done or (an abort mark won)
// cancelled.
func (e *env) expectEnded(ctx context.Context, conv, input storage.ID) error {
	if input == 0 {
		return nil
	}
	if err := e.expect(ctx, conv, input, agent.InputDone); err != nil {
		return e.expect(ctx, conv, input, agent.InputCancelled)
	}
	return nil
}

// turnIn is turn in conversation conv.
func (e *env) turnIn(ctx context.Context, conv storage.ID, text string) error {
	e.faux.AppendResponses(faux.Reply(faux.Text("answered " + text)))
	id, err := e.accept(ctx, conv, agent.ModeFollowUp, text)
	if err != nil {
		return err
	}
	e.driveAsync(ctx, conv).Wait(ctx)
	return e.expect(ctx, conv, id, agent.InputDone)
}
