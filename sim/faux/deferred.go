package faux

import (
	"bytes"
	"context"
	"fmt"

	"github.com/pico-go/pico/core/ai"
)

// Deferred responses. A step whose stopReason is deferred ends its call
// with done{reason: deferred} and a message holding a handle (the scripted
// one, completed, or "faux-deferred-N"). The handle is then fetched:
//
//   - the first Options.Deferred.PendingFetches fetches answer deferred
//     again, with the same handle;
//   - the next fetch takes the next queued step and plays it against the
//     original request, so a script reads in order: the deferred step, then
//     the answer it resolves to. An empty queue answers the usual error,
//     and a later fetch may try again;
//   - once resolved, every further fetch replays the same answer.
//
// A fetch of an unknown or cancelled handle ends with an error event. A fetch
// is not a call: it counts in DeferredFetches, not in Calls or Requests.

type deferredEntry struct {
	handle    ai.Deferred
	req       ai.Request
	pending   int
	cancelled bool
	final     *ai.Message
}

// registerDeferred completes a scripted handle (or makes one) and remembers
// the request it answers. p.mu is held.
func (p *Provider) registerDeferred(h *ai.Deferred, model ai.Model, req ai.Request) *ai.Deferred {
	var d ai.Deferred
	if h != nil {
		d = *h
		d.Data = bytes.Clone(h.Data)
	}
	if d.ID == "" {
		d.ID = fmt.Sprintf("faux-deferred-%d", len(p.deferred)+1)
	}
	if d.Provider == "" {
		d.Provider = model.Provider
	}
	if d.ModelID == "" {
		d.ModelID = model.ID
	}
	if d.API == "" {
		d.API = model.API
	}
	if d.PollAfterMs == 0 {
		d.PollAfterMs = p.deferOpt.PollAfterMs
	}
	p.deferred[d.ID] = &deferredEntry{handle: d, req: cloneRequest(req), pending: max(0, p.deferOpt.PendingFetches)}
	out := d
	out.Data = bytes.Clone(d.Data)
	return &out
}

// FetchDeferred streams the current state of a deferred response (see the
// rules above). ctx scopes the stream as for Stream.
func (p *Provider) FetchDeferred(ctx context.Context, handle ai.Deferred) ai.Stream {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deferredFetches++
	model := p.requestModel(ai.Model{ID: handle.ModelID, Provider: handle.Provider, API: handle.API})
	now := p.rt.Now().UnixMilli()
	s := &stream{rt: p.rt, rec: p.rec, ctx: ctx, model: model, fetch: handle.ID}
	entry := p.deferred[handle.ID]
	switch {
	case entry == nil || entry.handle.Provider != handle.Provider || entry.handle.ModelID != handle.ModelID || entry.handle.API != handle.API:
		s.setupFailure = failedMessage(model, "faux: unknown deferred response "+handle.ID, now)
	case entry.cancelled:
		s.setupFailure = failedMessage(model, "faux: deferred response "+handle.ID+" was cancelled", now)
	case entry.pending > 0:
		entry.pending--
		h := entry.handle
		p.answerWith(s, &ai.Message{
			Role: ai.RoleAssistant, Content: ai.Blocks(),
			API: model.API, Provider: model.Provider, Model: model.ID,
			Usage: &ai.Usage{}, StopReason: ai.StopDeferred, Deferred: &h, Timestamp: now,
		})
	case entry.final != nil:
		p.answerWith(s, cloneMessage(entry.final))
	default:
		step, ok := Step{}, len(p.queue) > 0
		if ok {
			step, p.queue = p.queue[0], p.queue[1:]
		}
		played := p.play(ctx, 0, entry.req, step, ok)
		played.fetch = handle.ID
		if played.setupFailure == nil {
			entry.final = cloneMessage(played.final)
		}
		s = played
	}
	p.record("faux.fetch", callRecord{Model: model.ID, Fetch: handle.ID, Answer: s.answer(), Pending: len(p.queue)})
	return s
}

// CancelDeferred cancels a deferred response: later fetches of it fail.
func (p *Provider) CancelDeferred(handle ai.Deferred) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := handle
	h.Data = bytes.Clone(handle.Data)
	p.cancelled = append(p.cancelled, h)
	if entry := p.deferred[handle.ID]; entry != nil {
		entry.cancelled = true
	}
	p.record("faux.cancelDeferred", map[string]string{"id": handle.ID})
}

// DeferredFetches is the number of FetchDeferred calls so far.
func (p *Provider) DeferredFetches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deferredFetches
}

// CancelledDeferred returns the handles CancelDeferred was called with.
func (p *Provider) CancelledDeferred() []ai.Deferred {
	p.mu.Lock()
	defer p.mu.Unlock()
	return cloneSlice(p.cancelled, func(d ai.Deferred) ai.Deferred {
		d.Data = bytes.Clone(d.Data)
		return d
	})
}
