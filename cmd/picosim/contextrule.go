package main

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The context rule (pico-v3.md §2.2), derived here on its own and held to
// what the harness derives (core.DeriveContext, over the storage's
// fork-aware head and range reads): H is the newest head visible at the
// target; the range is the visible entries from H's boundary through the
// target; the context is H, then the range without its heads, edits of
// the range folded in transcript order (the newest for a target wins, an
// omit drops it, a replace keeps its id with the edit's messages). Visible
// is a conversation's own entries through the target and, for a fork, its
// parent's visible at the fork point (§2.4). Nothing here reads a head or
// a fork-aware range: only each conversation's own entries and parent.

// ruleEntry is one entry of a context: its id, and its messages after edits.
type ruleEntry struct {
	ID       storage.ID
	Replaced bool
	Messages []ai.Message
}

// transcripts are what the rule reads: the conversations that exist and
// each one's own entries, ascending.
type transcripts struct {
	convs map[storage.ID]storage.Conversation
	own   map[storage.ID][]*storage.Entry
	// deleted are the conversations the batches deleted (convrule.go).
	deleted map[storage.ID]bool
}

func readTranscripts(ctx context.Context, store storage.Storage, convs []storage.Conversation) (*transcripts, error) {
	t := &transcripts{convs: map[storage.ID]storage.Conversation{}, own: map[storage.ID][]*storage.Entry{}, deleted: map[storage.ID]bool{}}
	for _, c := range convs {
		t.convs[c.ID] = c
		entries, err := storage.AllPages(func(cur storage.Cursor) (storage.Page[*storage.Entry], error) {
			return store.ScanEntries(ctx, storage.EntryQuery{ConversationID: c.ID, Cursor: cur})
		})
		if err != nil {
			return nil, fmt.Errorf("conversation %d: %w", c.ID, err)
		}
		for _, e := range entries {
			if e.ConversationID == c.ID {
				t.own[c.ID] = append(t.own[c.ID], e)
			}
		}
	}
	return t, nil
}

// derive is the rule's context of conv at through; false when its history
// reaches a conversation that no longer exists (deleted), whose entries
// the rule cannot read on their own.
func (t *transcripts) derive(conv, through storage.ID) ([]ruleEntry, bool) {
	visible, ok := t.visible(conv, through)
	if !ok {
		return nil, false
	}
	var head *storage.Entry
	for _, e := range visible {
		if e.IsHead() {
			head = e
		}
	}
	var rng []*storage.Entry
	for _, e := range visible {
		if head == nil || e.ID >= head.Head {
			rng = append(rng, e)
		}
	}
	edits := map[storage.ID]storage.ContextEdit{}
	for _, e := range rng {
		for _, ed := range e.Edits {
			if slices.ContainsFunc(rng, func(x *storage.Entry) bool { return x.ID == ed.Target }) {
				edits[ed.Target] = ed
			}
		}
	}
	var out []ruleEntry
	add := func(e *storage.Entry) {
		ed, edited := edits[e.ID]
		switch {
		case !edited:
			out = append(out, ruleEntry{ID: e.ID, Messages: e.Model})
		case ed.Action != storage.EditOmit:
			out = append(out, ruleEntry{ID: e.ID, Replaced: true, Messages: ed.Messages})
		}
	}
	if head != nil {
		add(head)
	}
	for _, e := range rng {
		if !e.IsHead() {
			add(e)
		}
	}
	return out, true
}

// contextRuleProblem compares the harness's context of conv at through
// with the rule's; "" when they agree (or the rule cannot say).
func contextRuleProblem(ctx context.Context, store storage.Storage, t *transcripts, conv, through storage.ID) string {
	want, ok := t.derive(conv, through)
	if !ok {
		return ""
	}
	cx, err := core.DeriveContext(ctx, store, conv, through)
	if err != nil {
		return fmt.Sprintf("conversation %d: its context at %d does not derive: %v", conv, through, err)
	}
	got := make([]ruleEntry, len(cx.Entries))
	for i, e := range cx.Entries {
		got[i] = ruleEntry{ID: e.Entry.ID, Replaced: e.Replaced, Messages: e.Messages}
	}
	if slices.EqualFunc(got, want, func(a, b ruleEntry) bool { return reflect.DeepEqual(a, b) }) {
		return ""
	}
	return fmt.Sprintf("conversation %d: its context at %d is %s; the rule (§2.2) gives %s", conv, through, describeRule(got), describeRule(want))
}

// describeRule lists a context's ids, a replaced one starred.
func describeRule(es []ruleEntry) string {
	out := "["
	for i, e := range es {
		if i > 0 {
			out += " "
		}
		out += e.ID.String()
		if e.Replaced {
			out += "*"
		}
	}
	return out + "]"
}

// contextTargets are where a run holds a conversation's context to the
// rule besides its end: just before and at each head it can see (up to
// contextTargetsMax of them) and at its fork point, where what is visible
// changes.
func (t *transcripts) contextTargets(conv storage.ID) []storage.ID {
	var out []storage.ID
	if rec := t.convs[conv]; rec.Parent != nil {
		out = append(out, rec.Parent.At)
	}
	for c := conv; ; {
		for _, e := range t.own[c] {
			if e.IsHead() && len(out) < contextTargetsMax {
				out = append(out, e.ID-1, e.ID)
			}
		}
		rec, ok := t.convs[c]
		if !ok || rec.Parent == nil {
			break
		}
		c = rec.Parent.ConversationID
	}
	return out
}

// contextTargetsMax bounds the historical targets of one conversation.
const contextTargetsMax = 24

// ruleContext: every conversation's context, at the end of a run and at
// the targets where what it sees changes, is the rule's (§2.2).
const ruleContext oracleRule = "context-derives-by-the-rule"

// historicalContexts holds every conversation's context at its
// contextTargets to the rule (picosim check's invariants hold the end).
func historicalContexts(ctx context.Context, store storage.Storage) error {
	convs, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
		return store.ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
	})
	if err != nil {
		return err
	}
	rule, err := readTranscripts(ctx, store, convs)
	if err != nil {
		return err
	}
	for _, c := range convs {
		for _, at := range rule.contextTargets(c.ID) {
			if at <= 0 {
				continue // 0 would mean the end
			}
			if p := contextRuleProblem(ctx, store, rule, c.ID, at); p != "" {
				return broke(ruleContext, "%s", p)
			}
		}
	}
	return nil
}
