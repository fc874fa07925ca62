package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
)

// The collapse scenarios (§8.4): a manual collapse under a running turn,
// the overflow chain, and a summary a reset makes stale. Their host actions
// are "collapse" and "reset".

// settleWaitMax bounds how long, in virtual time, a scenario waits for a
// background task to end.
const settleWaitMax = time.Minute

// waitSettled waits, in virtual time, until task id is terminal, and
// returns it.
func (e *env) waitSettled(ctx context.Context, id storage.ID) (*storage.Task, error) {
	rt := e.s.Runtime()
	deadline := rt.Now().Add(settleWaitMax)
	for rt.Now().Before(deadline) {
		task, ok, err := e.h.GetTask(ctx, id)
		switch {
		case err != nil:
			return nil, err
		case !ok:
			return nil, fmt.Errorf("task %d is gone", id)
		case !task.Live():
			return task, nil
		}
		if err := rt.Sleep(ctx, 10*time.Millisecond); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("task %d is still live after %s", id, settleWaitMax)
}

// prompts runs turns in the root, each expected done.
func (e *env) prompts(ctx context.Context, texts ...string) error {
	for _, t := range texts {
		if err := e.turn(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// collapseNow is the host action of a manual collapse of the root keeping
// only its newest exchange; 0 when the action is dropped.
func (e *env) collapseNow(ctx context.Context) (storage.ID, error) {
	if !e.host("collapse") {
		return 0, nil
	}
	c, err := e.h.Conversation(ctx, root)
	if err != nil {
		return 0, err
	}
	keep := int64(0)
	e.oracle.manualKeep = &keep
	defer func() { e.oracle.manualKeep = nil }()
	return c.Collapse(ctx, agent.CollapseOptions{KeepRecent: &keep})
}

// collapseUnderTurn: a manual collapse summarizes while a turn streams;
// the summary lands under the generation, whose input and answer stay in
// the context after it.
func collapseUnderTurn(ctx context.Context, e *env) error {
	e.faux.SetResponses(reply("first"), reply("second"), reply(strings.Repeat("streaming words ", 20)).WithDelay(time.Second), reply("the summary"))
	if err := e.prompts(ctx, "one", "two"); err != nil {
		return err
	}
	id, err := e.accept(ctx, root, agent.ModeFollowUp, "three")
	if err != nil {
		return err
	}
	done := e.driveAsync(ctx, root)
	if err := e.s.Runtime().Sleep(ctx, time.Duration(e.s.Rand().IntN(200))*time.Millisecond); err != nil {
		return err
	}
	collapse, err := e.collapseNow(ctx)
	if err != nil {
		return err
	}
	done.Wait(ctx)
	if err := e.expect(ctx, root, id, agent.InputDone); err != nil {
		return err
	}
	if collapse != 0 {
		task, err := e.waitSettled(ctx, collapse)
		if err != nil {
			return err
		}
		if task.Status != "done" {
			return fmt.Errorf("collapse %d ended %s with nothing competing; want done", collapse, task.Status)
		}
		cx, err := core.DeriveContext(ctx, e.h.Store(), root, 0)
		if err != nil {
			return err
		}
		if cx.Head == nil || cx.Head.Kind != core.SummaryKind.Kind() || cx.Entries[len(cx.Entries)-1].Entry.Kind != core.AssistantKind.Kind() {
			return fmt.Errorf("the context after the turn is headed by %v and ends with %s; want the summary, then the turn's answer", cx.Head, cx.Entries[len(cx.Entries)-1].Entry.Kind)
		}
	}
	return e.settled(ctx, nil)
}

// overflowChain: a turn overflows the context; its generation hands the
// turn to a collapse whose settlement creates the one retry, and nothing
// live waits on the collapse meanwhile.
func overflowChain(ctx context.Context, e *env) error {
	c, err := e.h.Conversation(ctx, root)
	if err != nil {
		return err
	}
	settings, err := c.Config(agent.CollapseKind)
	if err != nil {
		return err
	}
	if err := settings.Set(ctx, map[string]any{"keepRecent": 0}); err != nil {
		return err
	}
	e.faux.SetResponses(reply("first"), reply("second"), faux.ContextOverflow(), reply("the summary"), reply("answered after the collapse"))
	if err := e.prompts(ctx, "one", "two"); err != nil {
		return err
	}
	if err := e.turn(ctx, "three"); err != nil {
		return err
	}
	collapses, err := e.h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: 10}, Kind: agent.CollapseKindName})
	if err != nil {
		return err
	}
	if len(collapses.Items) != 1 || collapses.Items[0].Status != "done" {
		return fmt.Errorf("%d collapses after the overflow; want one, done", len(collapses.Items))
	}
	return e.settled(ctx, nil)
}

// staleSummary: a reset (a handoff on even seeds) lands while a collapse
// summarizes, so the summary is stale and never lands; without it, it does.
func staleSummary(ctx context.Context, e *env) error {
	e.faux.SetResponses(reply("first"), reply("second"), reply("the summary").WithDelay(time.Second))
	if err := e.prompts(ctx, "one", "two"); err != nil {
		return err
	}
	collapse, err := e.collapseNow(ctx)
	if err != nil {
		return err
	}
	if collapse == 0 {
		return e.settled(ctx, nil)
	}
	if _, err := e.h.Drive(ctx); err != nil {
		return err
	}
	if err := e.s.Runtime().Sleep(ctx, time.Duration(e.s.Rand().IntN(500))*time.Millisecond); err != nil {
		return err
	}
	// Even seeds hand off instead: a handoff is a head too, and stales the
	// summary as a reset does.
	action, handoff := "reset", ""
	if e.spec.seed%2 == 0 {
		action, handoff = "handoff", "start afresh"
	}
	reset := e.host(action)
	if reset {
		c, err := e.h.Conversation(ctx, root)
		if err != nil {
			return err
		}
		if _, _, err := c.Reset(ctx, handoff); err != nil {
			return err
		}
	}
	task, err := e.waitSettled(ctx, collapse)
	if err != nil {
		return err
	}
	var st agent.CollapseState
	if err := json.Unmarshal(task.State, &st); err != nil {
		return err
	}
	page, err := e.h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 10}, ConversationID: root, Kind: core.SummaryKind.Kind()})
	if err != nil {
		return err
	}
	summaries := len(page.Items)
	switch {
	case reset && (task.Status != "failed" || st.Failure != agent.CollapseStale || summaries != 0):
		return fmt.Errorf("after a %s the collapse is %s (%s) with %d summaries; want failed(stale) and none", action, task.Status, st.Failure, summaries)
	case !reset && (task.Status != "done" || summaries != 1):
		return fmt.Errorf("without a %s the collapse is %s (%s) with %d summaries; want done and one", action, task.Status, st.Failure, summaries)
	}
	return e.settled(ctx, nil)
}

// staleCollapseSeeds is how often a drawn program resets the root while a
// collapse of it summarizes: every tenth seed from 2, not the golden
// traces' seed 1, every other one of them a handoff seed.
const staleCollapseSeeds = 10

// drawStaleCollapses has such a program begin, from a generator of its
// own, with two turns of the root and a collapse of it whose summarizer
// answers slowly, and a reset (a handoff on the handoff seeds) while it waits:
// the newer head makes the summary stale, and it must not land.
func drawStaleCollapses(p *program, seed uint64) {
	if seed%staleCollapseSeeds != 2 {
		return
	}
	rng := seededRNG(seed, "stale collapses")
	reset := progLine{op: "reset", args: []string{"c0"}}
	if seed%handoffSeeds == 2 {
		reset.args = append(reset.args, "start afresh") // as drawHandoffs makes every reset of these seeds
	}
	block := collapseAfterTwoTurns(1, progLine{op: "respond", args: []string{"slow", "1000", "the summary"}})
	block = slices.Insert(block, collapseLine+1, progLine{op: "sleep", args: []string{strconv.Itoa(1 + rng.IntN(500))}}, reset)
	p.lines = append(block, p.lines...)
}
