package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The prompt rule: a host's Prompt (accept, drive until idle, answer) ends
// as its input did. A program's prompt cN TEXT line prompts with a request
// id of its own (prompt-N), so the rule finds the input among the
// conversation's results, and, once the Prompt returns:
//   - an answer entry only when the input ended done, that input's result
//     entry, an assistant entry of the conversation;
//   - an *agent.InputError only when the input ended otherwise, naming
//     that input and its terminal result as stored.
//
// A Prompt still running after the drive's bound is left running, as a
// drive is; an error of a closing or faulted session is not judged.

// rulePrompt: a Prompt answers as its input ended.
const rulePrompt oracleRule = "a-prompt-answers-as-its-input-ended"

// prompt runs a program's prompt line in conversation conv.
func (g *programRun) prompt(ctx context.Context, conv storage.ID, text string) error {
	e := g.e
	c, err := e.h.Conversation(ctx, conv)
	if err != nil {
		return err
	}
	g.prompts++
	req := fmt.Sprintf("prompt-%d", g.prompts)
	rt := e.s.Runtime()
	bound, cancel := context.WithCancel(ctx)
	defer cancel()
	done := rt.NewEvent("prompt")
	var answer *storage.Entry
	var perr error
	rt.Go(bound, "prompt", func(ctx context.Context) {
		answer, perr = c.Prompt(ctx, ai.PlainText(text), agent.AcceptOptions{RequestID: req})
		done.Set()
	})
	for start := rt.Now(); !done.IsSet(); {
		if rt.Now().Sub(start) >= driveBound {
			return nil // left running, as a drive is
		}
		if err := rt.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	var ie *agent.InputError
	switch {
	case perr != nil && !errors.As(perr, &ie):
		return perr // refused, or the session's fault
	case e.h == nil:
		return nil
	}
	return e.oracle.prompted(ctx, e.h.Store(), conv, req, answer, ie)
}

// prompted holds a Prompt of conv with request id req, which returned
// answer or ie, to the rule.
func (o *oracle) prompted(ctx context.Context, store storage.Storage, conv storage.ID, req string, answer *storage.Entry, ie *agent.InputError) error {
	input, res, found, err := resultByRequest(ctx, store, conv, req)
	if err != nil {
		return err
	}
	fail := func(format string, args ...any) error {
		return o.fail(broke(rulePrompt, "the host's Prompt of conversation %d (request %s) %s", conv, req, fmt.Sprintf(format, args...)))
	}
	switch {
	case !found:
		return fail("returned, and no input of the conversation carries its request id")
	case answer != nil && res.Status != agent.InputDone:
		return fail("answered with entry %d, though input %d ended %s", answer.ID, input, res.Status)
	case answer != nil && (answer.ID != res.ResultEntryID || answer.Kind != "assistant" || answer.ConversationID != conv):
		return fail("answered with entry %d (%s of conversation %d); input %d's result entry is %d", answer.ID, answer.Kind, answer.ConversationID, input, res.ResultEntryID)
	case ie != nil && ie.Input != input:
		return fail("failed naming input %d; its input is %d", ie.Input, input)
	case ie != nil && !res.Status.Terminal():
		return nil // unresolved when the drive ended: nothing settled to compare
	case ie != nil && (res.Status == agent.InputDone || ie.Result != res):
		return fail("failed with %+v; input %d ended %+v", ie.Result, input, res)
	}
	return nil
}

// resultByRequest finds the input of conv accepted with request id req and
// its result as stored.
func resultByRequest(ctx context.Context, store storage.Storage, conv storage.ID, req string) (input storage.ID, res agent.InputResult, found bool, err error) {
	err = agent.EachInputResult(ctx, store, conv, func(id storage.ID, r agent.InputResult, _ json.RawMessage) {
		if r.RequestID == req && !found {
			input, res, found = id, r, true
		}
	})
	return input, res, found, err
}

// promptSeeds is how often a drawn program prompts: every fourth seed from
// 4, not the golden traces' seed 1.
const promptSeeds = 4

// drawPrompts has the program of every promptSeeds-th seed prompt one to
// three times, from a generator of its own, at random places: the root
// or the newest conversation it knows.
func drawPrompts(p *program, seed uint64) {
	if seed%promptSeeds != 0 {
		return
	}
	rng := seededRNG(seed, "prompts")
	words := []string{"what now", "summarize", "tool:a,b", "look"}
	for range 1 + rng.IntN(3) {
		l := progLine{op: "prompt", args: []string{[]string{"c0", "c-1"}[rng.IntN(2)], words[rng.IntN(len(words))]}}
		p.lines = slices.Insert(p.lines, rng.IntN(len(p.lines)), l) // before the final drive
	}
}
