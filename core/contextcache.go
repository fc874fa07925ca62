package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// contextCachesMax bounds how many conversations keep a cached context; the
// least recently used one is dropped first.
const contextCachesMax = 256

// contextCache is a conversation's derived context kept current by
// appending what landed since (§2.2): a plain entry appends; a new head or
// an entry with edits derives again from storage, since a head slices the
// range and an edit can change entries already folded. Entries are
// immutable, so nothing else can make the cache stale. The cache is a
// process-local convenience; the transcript is the truth.
type contextCache struct {
	head    *storage.Entry
	entries []ContextEntry
	last    storage.ID // the newest range entry folded in
	at      storage.ID // the sequence the cache is current through
	used    uint64
	proj    *projection // reset whenever entries are derived again
	// sys folds the system entries of entries[:sysScanned]; reset whenever
	// entries are derived again.
	sys        systemFolder
	sysScanned int
}

// currentContext returns a conversation's derived context at the store's
// last sequence. It runs on the line (inside a plan), which orders every
// use of the caches.
func (h *Harness) currentContext(ctx context.Context, store storage.Storage, conv storage.ID) (*Context, error) {
	through := store.LastSeq()
	h.contextUse++
	cc := h.contexts[conv]
	if cc == nil {
		cc = &contextCache{}
		if err := cc.rebuild(ctx, store, conv, through); err != nil {
			return nil, err
		}
		h.rememberContext(conv, cc)
	} else if cc.at < through {
		if err := cc.catchUp(ctx, store, conv, through); err != nil {
			delete(h.contexts, conv)
			return nil, err
		}
	}
	cc.used = h.contextUse
	n := len(cc.entries)
	// The full slice expression keeps a caller's append from writing into
	// the cache's spare capacity.
	return &Context{ConversationID: conv, Through: through, Head: cc.head, Entries: cc.entries[:n:n]}, nil
}

func (cc *contextCache) rebuild(ctx context.Context, store storage.Storage, conv, through storage.ID) error {
	head, rng, err := deriveRange(ctx, store, conv, through)
	if err != nil {
		return err
	}
	cc.head, cc.entries, cc.at, cc.proj = head, fold(head, rng), through, nil
	scanned := cc.sysScanned
	cc.sys, cc.sysScanned = newSystemFolder(cc.head), 0
	if plant.On("context-cache-system-unscanned") {
		cc.sysScanned = scanned
	}
	cc.last = 0
	if len(rng) > 0 {
		cc.last = rng[len(rng)-1].ID
	}
	return nil
}

func (cc *contextCache) catchUp(ctx context.Context, store storage.Storage, conv, through storage.ID) error {
	// A head is always in its own range, so an empty range means no head:
	// scanning after 0 is scanning everything.
	q := storage.EntryQuery{Cursor: storage.Cursor{After: cc.last, Limit: storage.PageLimitMax}, ConversationID: conv, Through: through}
	added, err := scanRange(ctx, store, q)
	if err != nil {
		return err
	}
	for _, e := range added {
		if e.IsHead() || len(e.Edits) > 0 {
			return cc.rebuild(ctx, store, conv, through)
		}
	}
	for _, e := range added {
		cc.entries = append(cc.entries, ContextEntry{Entry: e, Messages: e.Model})
		cc.last = e.ID
	}
	cc.at = through
	return nil
}

func (h *Harness) rememberContext(conv storage.ID, cc *contextCache) {
	if h.contexts == nil {
		h.contexts = map[storage.ID]*contextCache{}
	}
	if len(h.contexts) >= contextCachesMax {
		var oldest storage.ID
		for id, c := range h.contexts {
			if oldest == 0 || c.used < h.contexts[oldest].used {
				oldest = id
			}
		}
		delete(h.contexts, oldest)
	}
	h.contexts[conv] = cc
}

// projection is the part of a conversation's request projection that can no
// longer change as entries are appended: no call of an assistant in it
// awaits a result (each has its result, or a newer answer took its id), and
// the newest baseline is known. Requests copy it and project only the tail
// after it, so a turn's projection work is the copy, not a re-derivation. A
// new baseline, a head or an edit starts it over.
type projection struct {
	scanned  int           // entries paired into pairs and searched for the baseline
	pairs    callPairs     // the calls and results of the scanned entries
	baseline *ContextEntry // newest baseline among scanned entries
	epoch    storage.ID    // the head's id: older system entries are the last epoch's
	done     int           // entries folded into body
	body     []ai.Message  // the baseline slot, then the stable body
	passed   bool          // body has passed the baseline entry
}

// request projects the cached context plus pending (entries about to be
// committed with the request's own commit) exactly as Context.Request does.
func (cc *contextCache) request(pending []ContextEntry) ([]ai.Message, error) {
	p := cc.proj
	if p == nil {
		p = &projection{pairs: newCallPairs(), epoch: newSystemFolder(cc.head).epoch}
		cc.proj = p
	}
	for ; p.scanned < len(cc.entries); p.scanned++ {
		ce := &cc.entries[p.scanned]
		if SystemKind.Is(ce.Entry) && ce.Entry.ID >= p.epoch {
			d, err := systemData(ce.Entry)
			if err != nil {
				return nil, err
			}
			if d.Baseline {
				b := *ce
				p.baseline = &b
				p.done, p.body, p.passed = 0, nil, false
			}
		}
		for i := range ce.Messages {
			p.pairs.add(&ce.Messages[i])
		}
	}
	for _, ce := range pending {
		d, err := systemData(ce.Entry)
		newBaseline := SystemKind.Is(ce.Entry) && err == nil && d.Baseline
		if newBaseline || slices.ContainsFunc(ce.Messages, func(m ai.Message) bool { return m.Role == ai.RoleToolResult }) {
			// A new epoch, or results the index has not seen: project the
			// whole context this once.
			full := &Context{Head: cc.head, Entries: append(cc.entries[:len(cc.entries):len(cc.entries)], pending...)}
			return full.Request()
		}
	}
	if p.body == nil && p.baseline != nil {
		p.body = append(p.body, p.baseline.Messages...)
	}
	for ; p.done < len(cc.entries); p.done++ {
		ce := cc.entries[p.done]
		if !p.resolved(ce) {
			break
		}
		p.body = p.project(p.body, ce, &p.passed)
	}
	if p.done == len(cc.entries) && len(pending) == 0 {
		// Nothing after the stable body: the request shares it. The full
		// slice expression makes an append by the caller copy, and the body
		// only ever grows past n, so what the request sees never changes.
		n := len(p.body)
		if n == 0 {
			return []ai.Message{}, nil // as Request: empty, never nil
		}
		return p.body[:n:n], nil
	}
	out := make([]ai.Message, len(p.body), len(p.body)+2*(len(cc.entries)-p.done+len(pending)))
	copy(out, p.body)
	passed := p.passed
	for _, ce := range cc.entries[p.done:] {
		out = p.project(out, ce, &passed)
	}
	for _, ce := range pending {
		out = p.project(out, ce, &passed)
	}
	return out, nil
}

// resolved reports whether no call of the entry's assistant messages awaits
// a result, which makes its projection final.
func (p *projection) resolved(ce ContextEntry) bool {
	for i := range ce.Messages {
		if m := &ce.Messages[i]; m.Role == ai.RoleAssistant && p.pairs.awaits(m) {
			return false
		}
	}
	return true
}

// project appends one context entry's request messages, as Request's loop
// does: the baseline and subsumed system entries are skipped, and results
// are placed with their calls.
func (p *projection) project(out []ai.Message, ce ContextEntry, passed *bool) []ai.Message {
	switch {
	case p.baseline != nil && ce.Entry == p.baseline.Entry:
		*passed = true
		return out
	case (p.baseline != nil && !*passed || ce.Entry.ID < p.epoch) && SystemKind.Is(ce.Entry):
		return out // subsumed, or of the epoch before the head
	}
	for i := range ce.Messages {
		m := &ce.Messages[i]
		switch {
		case m.Role == ai.RoleToolResult:
			continue
		case m.Role == ai.RoleAssistant && (m.StopReason == ai.StopError && !plant.On("request-keeps-failed-answer") || m.StopReason == ai.StopAborted && !plant.On("context-cache-keeps-aborted")):
			continue
		}
		out = append(out, *m)
		if m.Role == ai.RoleAssistant {
			out = p.pairs.place(out, m, plant.On("request-skips-missing-result"))
		}
	}
	return out
}

// currentSystem folds the system entries of a conversation's current
// context, as Context.System does, from its cache: only entries appended
// since the last call are folded. It runs on the line.
func (h *Harness) currentSystem(ctx context.Context, store storage.Storage, conv storage.ID) (SystemFold, error) {
	if _, err := h.currentContext(ctx, store, conv); err != nil {
		return SystemFold{}, err
	}
	cc := h.contexts[conv]
	for ; cc.sysScanned < len(cc.entries); cc.sysScanned++ {
		if err := cc.sys.add(cc.entries[cc.sysScanned].Entry); err != nil {
			return SystemFold{}, err
		}
	}
	fold := cc.sys.fold()
	if h.opts.CheckContexts {
		h.assertContext(ctx, store, conv, "system fold", fold, func(fresh *Context) (any, error) { return fresh.System() })
	}
	return fold, nil
}

// currentRequest projects a conversation's request from its cached context
// plus pending entries of the calling commit. It runs on the line.
func (h *Harness) currentRequest(ctx context.Context, store storage.Storage, conv storage.ID, pending []ContextEntry) ([]ai.Message, error) {
	if _, err := h.currentContext(ctx, store, conv); err != nil {
		return nil, err
	}
	msgs, err := h.contexts[conv].request(pending)
	if err == nil && h.opts.CheckContexts {
		h.assertContext(ctx, store, conv, "request", msgs, func(fresh *Context) (any, error) {
			fresh.Entries = append(fresh.Entries, pending...)
			return fresh.Request()
		})
	}
	return msgs, err
}

// assertContext holds what the cache answered of conv (what) to the same
// answer derived afresh from storage, compared as JSON, and panics with the
// *DriverInvariantError "context" when they differ (Options.CheckContexts).
// A fresh derivation that fails is no verdict on the cache.
func (h *Harness) assertContext(ctx context.Context, store storage.Storage, conv storage.ID, what string, cached any, derive func(fresh *Context) (any, error)) {
	fresh, err := DeriveContext(ctx, store, conv, 0)
	if err != nil {
		return
	}
	want, err := derive(fresh)
	if err != nil {
		return
	}
	got, gerr := json.Marshal(cached)
	exp, werr := json.Marshal(want)
	if gerr != nil || werr != nil || bytes.Equal(got, exp) {
		return
	}
	i := 0
	for i < len(got) && i < len(exp) && got[i] == exp[i] {
		i++
	}
	panic(&DriverInvariantError{Invariant: "context", Detail: fmt.Sprintf(
		"conversation %d at sequence %d: the cached %s differs from a fresh derivation at byte %d: cached %s, derived %s",
		conv, store.LastSeq(), what, i, excerpt(got, i), excerpt(exp, i))})
}

// excerpt is b around offset i, for an invariant's detail.
func excerpt(b []byte, i int) string {
	lo, hi := max(0, i-60), min(len(b), i+60)
	return fmt.Sprintf("…%s…", b[lo:hi])
}

// DerivedContext is conversation conv's derived context as committed, from
// the session's per-conversation cache (§2.2): what DeriveContext would
// return through the last sequence, without re-reading what the cache
// already folded. It is shared memory: read it, never change it. A
// transaction of a bare line derives afresh.
func (tx *Tx) DerivedContext(conv storage.ID) (*Context, error) {
	if tx.h == nil {
		return DeriveContext(tx.ctx, tx.store, conv, 0)
	}
	c, err := tx.h.currentContext(tx.ctx, tx.store, conv)
	if err == nil && tx.h.opts.CheckContexts {
		tx.h.assertContext(tx.ctx, tx.store, conv, "context", contextShape(c), func(fresh *Context) (any, error) { return contextShape(fresh), nil })
	}
	return c, err
}

// contextShape is what a context is, for comparing two: its head and its
// entries' ids and messages.
func contextShape(c *Context) any {
	type entry struct {
		ID       storage.ID
		Messages []ai.Message
	}
	shape := struct {
		Head    *storage.Entry
		Through storage.ID
		Entries []entry
	}{Head: c.Head, Through: c.Through}
	for _, e := range c.Entries {
		shape.Entries = append(shape.Entries, entry{e.Entry.ID, e.Messages})
	}
	return shape
}

// SystemFold is what conv's system entries, as committed, have told the
// model (Context.System), kept current in the cache: only entries appended
// since the last call are folded.
func (tx *Tx) SystemFold(conv storage.ID) (SystemFold, error) {
	if tx.h == nil {
		c, err := DeriveContext(tx.ctx, tx.store, conv, 0)
		if err != nil {
			return SystemFold{}, err
		}
		return c.System()
	}
	return tx.h.currentSystem(tx.ctx, tx.store, conv)
}

// RequestMessages projects conv's model request (Context.Request) from the
// cached context plus pending, entries this transaction appends that the
// request must include (PendingEntry). Only the part after the cache's
// stable prefix is projected again; a request whose context is all stable
// shares the cache's messages, so the result is read-only.
func (tx *Tx) RequestMessages(conv storage.ID, pending []ContextEntry) ([]ai.Message, error) {
	if tx.h == nil {
		c, err := DeriveContext(tx.ctx, tx.store, conv, 0)
		if err != nil {
			return nil, err
		}
		full := &Context{ConversationID: conv, Through: c.Through, Entries: append(c.Entries, pending...)}
		return full.Request()
	}
	return tx.h.currentRequest(tx.ctx, tx.store, conv, pending)
}
