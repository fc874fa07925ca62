package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/pico-go/pico/core/boundary"
	"github.com/pico-go/pico/storage"
)

// The transition rule (DESIGN §11): a provider boundary is one commit,
// and what it writes is what its kind says, judged against the session
// as the oracle has followed it (which conversation is current, each
// conversation's newest entry), not against what the boundary package
// read:
//
//   - every binding of a provider session is written once: a repeated or
//     racing delivery writes nothing;
//   - startup and resume bind the current conversation and create none;
//   - clear creates a conversation of no parent and no owner whose entry
//     is the provider_boundary naming the current one as previous, marks
//     the current one stopped with the new one as successor, and makes the
//     new one current;
//   - fork creates a fork of the current conversation at its newest entry
//     (at its start when it has none) and makes it current;
//   - nothing else changes which conversation is current;
//   - a boundary that would bind from a current conversation the host
//     deleted is refused (boundary.CurrentGoneError) and writes nothing.

// ruleTransition: a boundary's commit writes what its kind says.
const ruleTransition oracleRule = "boundary-transition"

// ruleClassify: a delivered lifecycle event means what its provider's
// hooks say it means (shared/reference/provider-hooks.md), and changes
// the session exactly when it binds a provider session not yet bound.
const ruleClassify oracleRule = "boundary-classify"

// boundarySession is what the transition rule follows of the session.
type boundarySession struct {
	current storage.ID      // pi.session.current (0: not set, the root)
	bound   map[string]bool // provider/session ids bound
	parents map[storage.ID]*storage.ParentRef
	newest  map[storage.ID]storage.ID // conversation → its own newest entry
}

// transition checks a batch against the transition rule, before the
// oracle takes in its writes: every batch that binds a provider session
// or changes the current conversation.
func (o *oracle) transition(b storage.CommitBatch, by string, r storage.Range) error {
	bs := &o.sessionState
	if bs.bound == nil {
		bs.bound, bs.parents, bs.newest = map[string]bool{}, map[storage.ID]*storage.ParentRef{}, map[storage.ID]storage.ID{}
	}
	var (
		bind                *boundary.Binding
		bindKey             string
		setCurrent, stopped *storage.Write
		created             []storage.Write
		entries             = map[storage.ID]*storage.Entry{}
	)
	for i := range b.Writes {
		w := &b.Writes[i]
		seq := r.First + storage.ID(i)
		switch {
		case w.Type == storage.WriteCreateConversation && w.Conversation != nil:
			created = append(created, *w)
		case w.Type == storage.WriteEntry && w.Entry != nil:
			entries[seq] = w.Entry
		case w.Type != storage.WriteValueSet || w.Addr == nil:
		case w.Addr.Namespace == boundary.BindingValue.Namespace:
			var v boundary.Binding
			if json.Unmarshal(w.Value, &v) == nil {
				bind, bindKey = &v, w.Addr.Key
			}
		case w.Addr.Namespace == boundary.CurrentValue.Namespace:
			setCurrent = w
		case w.Addr.Namespace == boundary.StoppedValue.Namespace:
			stopped = w
		}
	}
	before := o.currentConv()
	// What the batch does to the session, taken in whatever it is.
	defer func() {
		for _, w := range created {
			bs.parents[w.Conversation.ID] = w.Conversation.Parent
		}
		for id, e := range entries {
			bs.newest[e.ConversationID] = max(bs.newest[e.ConversationID], id)
		}
		if setCurrent != nil {
			_ = json.Unmarshal(setCurrent.Value, &bs.current)
		}
		if bind != nil {
			bs.bound[bindKey] = true
		}
	}()
	if bind == nil {
		if setCurrent != nil {
			return o.fail(broke(ruleTransition, "%s made %s current at %d without binding a provider session", by, setCurrent.Value, r.First))
		}
		return nil
	}
	fail := func(format string, args ...any) error {
		return o.fail(broke(ruleTransition, "%s's %s of %s at %d–%d: "+format, append([]any{by, bind.Kind, bindKey, r.First, r.Last}, args...)...))
	}
	if bs.bound[bindKey] {
		return fail("the provider session was bound already")
	}
	if o.transcripts.deleted[before] {
		return fail("the current conversation %d was deleted", before)
	}
	isCurrent := func(id storage.ID) bool {
		var got storage.ID
		return setCurrent != nil && json.Unmarshal(setCurrent.Value, &got) == nil && got == id
	}
	switch bind.Kind {
	case boundary.Startup, boundary.Resume:
		if bind.Conversation != before || len(created) > 0 || setCurrent != nil {
			return fail("bound %d, created %d conversations, set current %v; want the current %d bound and nothing else", bind.Conversation, len(created), setCurrent != nil, before)
		}
	case boundary.Clear:
		if len(created) != 1 || created[0].Conversation.ID != bind.Conversation || created[0].Conversation.Parent != nil || created[0].Conversation.Owner != 0 {
			return fail("want one new conversation %d of no parent and no owner; created %d", bind.Conversation, len(created))
		}
		if bind.Previous != before {
			return fail("previous %d; the current conversation was %d", bind.Previous, before)
		}
		e := entries[bind.Entry]
		var d boundary.BoundaryData
		if e == nil || e.ConversationID != bind.Conversation || e.Kind != boundary.EntryKind.Kind() || json.Unmarshal(e.Data, &d) != nil || d.Previous != before || string(d.Provider)+"/"+d.SessionID != bindKey {
			return fail("entry %d is not the new conversation's provider_boundary naming %d as previous", bind.Entry, before)
		}
		var st boundary.Stopped
		if stopped == nil || stopped.Addr.Scope.ID != before || json.Unmarshal(stopped.Value, &st) != nil || st.Successor != bind.Conversation || st.Reason != boundary.ReasonProviderClear {
			return fail("conversation %d is not marked stopped with %d as successor", before, bind.Conversation)
		}
		if !isCurrent(bind.Conversation) {
			return fail("the new conversation %d is not made current", bind.Conversation)
		}
	case boundary.Fork:
		at := bs.newestOf(before)
		if len(created) != 1 || created[0].Conversation.ID != bind.Conversation || created[0].Conversation.Parent == nil ||
			*created[0].Conversation.Parent != (storage.ParentRef{ConversationID: before, At: at}) || bind.Previous != before {
			return fail("want one fork %d of the current %d at its newest entry %d", bind.Conversation, before, at)
		}
		if !isCurrent(bind.Conversation) {
			return fail("the fork %d is not made current", bind.Conversation)
		}
	default:
		return fail("a binding of kind %q", bind.Kind)
	}
	return nil
}

// currentConv is the current conversation as the oracle has followed
// the session: pi.session.current, else the root.
func (o *oracle) currentConv() storage.ID {
	if cur := o.sessionState.current; cur != 0 || len(o.created) == 0 {
		return cur
	}
	return o.created[0]
}

// currentGone holds a boundary refused for its deleted current
// conversation to the transition rule: the provider session was not bound
// already (a repeat returns its binding), and the conversation the refusal
// names is the current one, which the host deleted. Any other refusal is
// returned as it is.
func (o *oracle) currentGone(err error, wasBound bool, line string) error {
	var gone *boundary.CurrentGoneError
	if !errors.As(err, &gone) {
		return err
	}
	if cur := o.currentConv(); wasBound || gone.Conversation != cur || !o.transcripts.deleted[cur] {
		return o.fail(broke(ruleTransition, "%s was refused as starting from the deleted conversation %d; the current one is %d (deleted: %v), the provider session bound already: %v",
			line, gone.Conversation, cur, o.transcripts.deleted[cur], wasBound))
	}
	return err
}

// newestOf is the newest entry of conv's transcript: its own newest, else
// what it inherits (its fork point), else none.
func (bs *boundarySession) newestOf(conv storage.ID) storage.ID {
	if id := bs.newest[conv]; id != 0 {
		return id
	}
	if p := bs.parents[conv]; p != nil {
		return p.At
	}
	return 0
}

// resyncSession reads what the transition rule follows from a restarted
// process's store: a commit that failed as the process stopped may have
// persisted, and the oracle saw none of its writes.
func (o *oracle) resyncSession(ctx context.Context, store storage.Storage, convs []storage.Conversation) error {
	bs := &o.sessionState
	if bs.bound == nil {
		bs.bound, bs.parents, bs.newest = map[string]bool{}, map[storage.ID]*storage.ParentRef{}, map[storage.ID]storage.ID{}
	}
	for _, c := range convs {
		bs.parents[c.ID] = c.Parent
		page, err := store.ScanEntries(ctx, storage.EntryQuery{ConversationID: c.ID, Cursor: storage.Cursor{Before: store.LastSeq() + 1, Limit: 1}})
		if err != nil {
			return err
		}
		if n := len(page.Items); n > 0 && page.Items[n-1].ConversationID == c.ID {
			bs.newest[c.ID] = page.Items[n-1].ID
		}
	}
	if v, ok, err := store.GetValue(ctx, boundary.CurrentValue.Address, 0); err != nil {
		return err
	} else if ok {
		_ = json.Unmarshal(v.Value, &bs.current)
	}
	for q := (storage.ValueQuery{Scope: storage.SessionScope(), Namespace: boundary.BindingValue.Namespace, Limit: storage.PageLimitMax}); ; {
		keys, err := store.ScanValues(ctx, q)
		if err != nil {
			return err
		}
		for _, k := range keys.Items {
			bs.bound[k.Key] = true
		}
		if keys.Next == 0 || len(keys.Items) == 0 {
			return nil
		}
		q.After = keys.Items[len(keys.Items)-1].Key
	}
}

// adapterModel is the rule's own reading of one provider's launch: the
// provider session the launch is bound to, and whether a clear's end
// waits for its start.
type adapterModel struct {
	bound string
}

// meaning is what the rule says a provider's event means, read against
// m, and the reading after it (when it applies):
//
//   - a session's end changes nothing (a clear's end only announces the
//     start that follows);
//   - a compaction is a compaction, unless it names a provider session
//     other than the bound one: Gemini's in-session /resume fires nothing
//     else, and the first event of the new id resumes it;
//   - a start's source says what it is: clear (Copilot: new) a clear, but
//     a repeat of the bound one nothing; resume a resume; fork a fork;
//     compact a compaction; ui-only nothing of the session's;
//   - a startup binds a launch bound to nothing; repeats the bound one to
//     no effect; with a new id, is a clear for Codex (its /new reports
//     startup) and a rebinding startup for the others.
func meaning(m adapterModel, p boundary.Provider, event, source, id string) (boundary.Kind, adapterModel) {
	bindAs := func(k boundary.Kind) (boundary.Kind, adapterModel) { return k, adapterModel{bound: id} }
	switch event {
	case boundary.EventSessionEnd:
		return boundary.None, m
	case boundary.EventPreCompact, boundary.EventPostCompact, boundary.EventPreCompress:
		if m.bound != "" && m.bound != id {
			return bindAs(boundary.Resume)
		}
		if m.bound == "" {
			m.bound = id
		}
		return boundary.Compact, m
	}
	switch source {
	case "clear", "new":
		if id == m.bound {
			return boundary.None, m
		}
		return bindAs(boundary.Clear)
	case "resume":
		return bindAs(boundary.Resume)
	case "fork":
		return bindAs(boundary.Fork)
	case "compact":
		if m.bound == "" {
			m.bound = id
		}
		return boundary.Compact, m
	case "ui-only":
		return boundary.UIOnly, m
	}
	switch {
	case m.bound == "":
		return bindAs(boundary.Startup)
	case m.bound == id:
		return boundary.None, m
	case p == boundary.Codex:
		return bindAs(boundary.Clear)
	}
	return bindAs(boundary.Startup)
}

// classified holds one delivery to the rule: the kind Classify gave it
// against the kind the rule reads, the provider session it names as the
// one before (bound: the launch's, by the rule's reading, named only when
// the event's is another), and whether Apply changed the session against
// whether it had a provider session to bind that was not bound (wasBound:
// as the session stood before the delivery).
func (o *oracle) classified(tr boundary.Transition, want boundary.Kind, wasBound bool, bound, line string) {
	binds := want == boundary.Startup || want == boundary.Resume || want == boundary.Clear || want == boundary.Fork
	previous := bound
	if bound == tr.Boundary.SessionID {
		previous = ""
	}
	switch {
	case tr.Boundary.Previous != previous:
		o.fail(broke(ruleClassify, "%q was classified with the provider session before it %q; the launch was bound to %q", line, tr.Boundary.Previous, bound))
	case tr.Boundary.Kind != want:
		o.fail(broke(ruleClassify, "%q was classified %s; its provider's hooks make it %s", line, tr.Boundary.Kind, want))
	case tr.Changed != (binds && !wasBound):
		o.fail(broke(ruleClassify, "%q (%s) changed the session: %v; want %v (the provider session bound before: %v)", line, want, tr.Changed, binds && !wasBound, wasBound))
	}
}
