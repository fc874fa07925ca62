package main

import (
	"slices"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// ruleCut: a collapse never splits an exchange (§2.3, §8.4): of a call
// and its result, the summary keeps both or summarizes both, and no result
// lands after a summary that summarized its call. Only what the context
// held before the summary counts: an older head's cut is its own.
const ruleCut oracleRule = "a-summary-keeps-exchanges-whole"

// visible is conversation conv's history through through, ascending: its
// own entries and, for a fork, its parent's through the fork point; false
// when the history reaches a conversation that no longer exists.
func (t *transcripts) visible(conv, through storage.ID) ([]*storage.Entry, bool) {
	var out []*storage.Entry
	for c, upTo := conv, through; ; {
		rec, ok := t.convs[c]
		if !ok {
			return nil, false
		}
		for _, e := range t.own[c] {
			if e.ID <= upTo {
				out = append(out, e)
			}
		}
		if rec.Parent == nil {
			break
		}
		c, upTo = rec.Parent.ConversationID, min(rec.Parent.At, upTo)
	}
	slices.SortFunc(out, func(a, b *storage.Entry) int { return int(a.ID - b.ID) })
	return out, true
}

// cutChecked holds a batch's summaries and tool results to the rule.
func (o *oracle) cutChecked(b storage.CommitBatch, r storage.Range, by string) error {
	for _, w := range b.Writes {
		e := w.Entry
		if w.Type != storage.WriteEntry || e == nil || e.Kind != "summary" && e.Kind != "tool_result" {
			continue
		}
		vis, _ := o.transcripts.visible(e.ConversationID, r.Last)
		var head, before *storage.Entry // the newest head, and the one before it
		for _, v := range vis {
			if v.IsHead() {
				head, before = v, head
			}
		}
		if head == nil || head.Kind != "summary" {
			continue
		}
		lo := storage.ID(0)
		if before != nil {
			lo = before.Head
		}
		calls := map[string]*storage.Entry{} // call id → the newest answer so far that called it
		for _, v := range vis {
			if v.ID >= lo && v.Kind == "assistant" && len(v.Model) > 0 && v.Model[0].Role == ai.RoleAssistant {
				for _, c := range v.Model[0].ToolCalls() {
					calls[c.ID] = v
				}
			}
			if v.Kind != "tool_result" || v.ID < lo {
				continue
			}
			// A result answers the newest call of its id before it that no
			// earlier result answered: of two results of one id (an answer
			// that names it twice), the first is the call's (§2.2).
			call, ok := calls[v.Key]
			delete(calls, v.Key)
			if e.Kind == "tool_result" && v != e {
				continue
			}
			if ok && (call.ID < head.Head) != (v.ID < head.Head) {
				return o.fail(broke(ruleCut, "%s wrote entry %d in %d–%d: conversation %d's summary %d keeps from %d, and so splits call %s (entry %d) from its result (entry %d)",
					by, e.ID, r.First, r.Last, e.ConversationID, head.ID, head.Head, v.Key, call.ID, v.ID))
			}
		}
	}
	return nil
}
