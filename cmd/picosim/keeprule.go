package main

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// ruleKeepRecent: a collapse cuts its context where §2.3 puts the cut for
// its keepRecent (the conversation's, and for one a generation starts at
// most half the tokens the context must fit in, §8.2), derived here on its
// own. The
// context (after its head) falls into units no cut divides: an input with
// the answer to it, or an answer that goes on with a turn, each with the
// results of its calls and the system entries just before it; any other
// entry is a unit of its own. The newest units whose estimated tokens fit
// in keepRecent are kept, and always the newest one; the cut is the first
// boundary at or after that where every call summarized has its result
// summarized too (a call of an older exchange may have none). A context
// that fits whole, or has one unit, makes no collapse, and a manual
// collapse of any other is made.
const ruleKeepRecent oracleRule = "collapse-keeps-its-recent-tokens"

// settingWrite is a write of one of a conversation's collapse settings at
// seq: its value, nil for a delete.
type settingWrite struct {
	seq   storage.ID
	value json.RawMessage
}

// collapseSettings are the settings the rule follows, by namespace.
var collapseSettings = []string{agent.CollapseKeepRecentValue.Namespace, agent.CollapseThresholdValue.Namespace}

// settingWritten records a write of a collapse setting at seq.
func (o *oracle) settingWritten(w storage.Write, seq storage.ID) {
	if w.Addr == nil || !slices.Contains(collapseSettings, w.Addr.Namespace) || w.Addr.Scope.Kind != storage.ScopeConversation {
		return
	}
	sw := settingWrite{seq: seq}
	if w.Type == storage.WriteValueSet {
		sw.value = w.Value
	}
	key := settingKey{w.Addr.Namespace, w.Addr.Scope.ID}
	o.settings[key] = append(o.settings[key], sw)
}

// settingKey names one setting of one conversation.
type settingKey struct {
	namespace string
	conv      storage.ID
}

// resyncSettings reads each conversation's collapse settings from a
// restarted process's store, as of its last sequence: a commit that failed
// as the process stopped may have written one the oracle never saw.
func (o *oracle) resyncSettings(ctx context.Context, store storage.Storage, convs []storage.Conversation) error {
	for _, c := range convs {
		for _, addr := range []storage.Address{agent.CollapseKeepRecentValue.Address, agent.CollapseThresholdValue.Address} {
			// The settings are rewindable: a fork reads its parent's as of
			// the fork point, and so must the read here.
			addr.Scope = storage.ConversationScope(c.ID)
			ns := addr.Namespace
			v, ok, err := store.GetValue(ctx, addr, 0)
			if err != nil {
				return err
			}
			sw := settingWrite{seq: o.last}
			if ok {
				sw.value = v.Value
			}
			key := settingKey{ns, c.ID}
			o.settings[key] = append(o.settings[key], sw)
		}
	}
	return nil
}

// settingAt decodes into v conv's setting in namespace as of pos: its own
// newest write, or for a fork its parent's as of the fork point (a rewind
// value); false when it has none.
func (o *oracle) settingAt(namespace string, conv, pos storage.ID, v any) bool {
	for c := conv; ; {
		ws := o.settings[settingKey{namespace, c}]
		for i := len(ws) - 1; i >= 0; i-- {
			if ws[i].seq <= pos {
				return ws[i].value != nil && json.Unmarshal(ws[i].value, v) == nil
			}
		}
		rec, ok := o.transcripts.convs[c]
		if !ok || rec.Parent == nil {
			return false
		}
		c, pos = rec.Parent.ConversationID, min(pos, rec.Parent.At)
	}
}

// keepRecentAt is the keepRecent a collapse of conv created at pos cuts
// for: the conversation's (or the default), and for one a generation
// starts at most half the tokens the context must fit in, the threshold's
// share of the model's window or, on an overflow, the window; false when
// the rule does not know the window.
func (o *oracle) keepRecentAt(reason agent.CollapseReason, conv, pos storage.ID) (int64, bool) {
	keep := int64(agent.CollapseKeepRecentDefault)
	o.settingAt(agent.CollapseKeepRecentValue.Namespace, conv, pos, &keep)
	budget := float64(o.window)
	switch reason {
	case agent.CollapseManual:
		if o.manualKeep != nil {
			keep = *o.manualKeep
		}
		return keep, true
	case agent.CollapseThreshold:
		var threshold float64
		o.settingAt(agent.CollapseThresholdValue.Namespace, conv, pos, &threshold)
		budget *= threshold
	}
	if o.window <= 0 {
		return 0, false
	}
	return min(keep, int64(budget/2)), true
}

// sharedWindow is the context window every one of models has, 0 when
// they differ.
func sharedWindow(models []ai.Model) int {
	window := 0
	for i, m := range models {
		if i > 0 && m.ContextWindow != window {
			return 0
		}
		window = m.ContextWindow
	}
	return window
}

// keepUnit is a run of context entries no cut divides.
type keepUnit struct {
	first, last int // indexes into the entries after the head
	answered    bool
	calls       []string
	tokens      int64
}

// collapseCut holds a collapse's creation (w, at seq, in a commit
// that read the state before pos) to the rule.
func (o *oracle) collapseCut(w storage.Write, by string, seq, pos storage.ID) error {
	var st agent.CollapseState
	if w.Task == nil || w.Task.Kind != agent.CollapseKindName || json.Unmarshal(w.Task.State, &st) != nil {
		return nil
	}
	conv := w.Task.ConversationID
	keep, known := o.keepRecentAt(st.Reason, conv, pos)
	if !known {
		return nil
	}
	through, first, cuts, known := o.cutAt(conv, st.At, keep)
	if !known {
		return nil
	}
	switch {
	case !cuts:
		return o.fail(broke(ruleKeepRecent, "%s created %s collapse %d of conversation %d at %d keeping %d tokens, summarizing through %d from %d; its context at %d makes no collapse",
			by, st.Reason, w.Task.ID, conv, seq, keep, st.Through, st.FirstRetained, st.At))
	case through != st.Through || first != st.FirstRetained:
		return o.fail(broke(ruleKeepRecent, "%s created %s collapse %d of conversation %d at %d keeping %d tokens, summarizing through %d and keeping from %d; the cut of its context at %d is after %d, keeping from %d",
			by, st.Reason, w.Task.ID, conv, seq, keep, st.Through, st.FirstRetained, st.At, through, first))
	}
	return nil
}

// cutAt is where the rule cuts conv's context as of at for keep: the last
// entry summarized and the first kept, cuts false when it makes no
// collapse; known false when the rule cannot derive the context.
func (o *oracle) cutAt(conv, at storage.ID, keep int64) (through, first storage.ID, cuts, known bool) {
	cx, ok := o.transcripts.derive(conv, at)
	if !ok {
		return 0, 0, false, false
	}
	entries := make([]*storage.Entry, 0, len(cx))
	for i, ce := range cx {
		e := o.transcripts.entry(conv, ce.ID)
		if e == nil {
			return 0, 0, false, false
		}
		if i == 0 && e.IsHead() {
			cx = cx[1:]
			continue
		}
		entries = append(entries, e)
	}
	through, first, cuts = planKeep(cx, entries, keep)
	return through, first, cuts, true
}

// nothingToCollapse holds a host's manual collapse of conv, which the
// harness refused with nothing to collapse while the session's last
// sequence stood at pos, to the rule: its context at pos has no cut.
func (o *oracle) nothingToCollapse(conv, pos storage.ID) error {
	keep, _ := o.keepRecentAt(agent.CollapseManual, conv, pos)
	if through, first, cuts, known := o.cutAt(conv, pos, keep); known && cuts {
		return o.fail(broke(ruleKeepRecent, "a host's collapse of conversation %d at %d found nothing to collapse keeping %d tokens; its context there is cut after %d, keeping from %d",
			conv, pos, keep, through, first))
	}
	return nil
}

// planKeep is where the rule cuts a context (cx after its head, with each
// entry's record): the last entry summarized and the first kept; false
// when it makes no collapse.
func planKeep(cx []ruleEntry, entries []*storage.Entry, keep int64) (through, first storage.ID, ok bool) {
	var units []keepUnit
	// A result answers the newest unit before it that called its id (an id
	// may come back in a later answer), once.
	type unitCall struct {
		unit int
		id   string
	}
	caller := map[string]int{}    // call id → the newest unit that called it
	results := map[unitCall]int{} // a unit's call → the index of its result
	system := -1                  // the first system entry not yet in a unit
	called := func(u int, calls []string) {
		for _, c := range calls {
			caller[c] = u
		}
	}
	for i, e := range entries {
		msgs := cx[i].Messages
		switch e.Kind {
		case core.SystemKind.Kind():
			if system < 0 {
				system = i
			}
			continue
		case core.ToolResultKind.Kind():
			if u, ok := caller[e.Key]; ok {
				if _, first := results[unitCall{u, e.Key}]; !first {
					results[unitCall{u, e.Key}] = i
				}
			}
			if len(units) > 0 && system < 0 {
				units[len(units)-1].last = i
				continue
			}
		}
		answer := len(msgs) > 0 && msgs[0].Role == ai.RoleAssistant
		var calls []string
		if answer {
			for _, b := range msgs[0].ToolCalls() {
				calls = append(calls, b.ID)
			}
		}
		if n := len(units); answer && n > 0 && !units[n-1].answered {
			units[n-1].last, units[n-1].answered, units[n-1].calls, system = i, true, calls, -1
			called(n-1, calls)
			continue
		}
		u := keepUnit{first: i, last: i, answered: answer, calls: calls}
		if system >= 0 {
			u.first, system = system, -1
		}
		units = append(units, u)
		called(len(units)-1, calls)
	}
	if system >= 0 && len(units) > 0 {
		units[len(units)-1].last = len(entries) - 1
	}
	if len(units) < 2 {
		return 0, 0, false
	}
	newestExchange := -1
	for i := range units {
		for _, ce := range cx[units[i].first : units[i].last+1] {
			units[i].tokens += agent.EstimateTokens(ce.Messages...)
		}
		if len(units[i].calls) > 0 {
			newestExchange = i
		}
	}
	k, kept := len(units)-1, units[len(units)-1].tokens
	for k > 0 && kept+units[k-1].tokens <= keep {
		k--
		kept += units[k].tokens
	}
	if k == 0 {
		return 0, 0, false
	}
	for ; k < len(units); k++ {
		end, whole := units[k-1].last, true
		for i, u := range units[:k] {
			for _, call := range u.calls {
				at, answered := results[unitCall{i, call}]
				whole = whole && !(answered && at > end) && (answered || i != newestExchange)
			}
		}
		if whole {
			return entries[units[k-1].last].ID, entries[units[k].first].ID, true
		}
	}
	return 0, 0, false
}
