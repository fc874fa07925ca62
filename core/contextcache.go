package core

import (
	"context"

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
	cc.head, cc.entries, cc.at = head, fold(head, rng), through
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
