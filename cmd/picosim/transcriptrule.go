package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pico-go/pico/storage"
)

// The transcript rule (pico-v3.md §2.1 forks; storage's entry scans),
// derived from the committed batches alone: a conversation's transcript
// is its own entries and, up its fork chain, each source's entries
// through the fork point (and every lower one), in id order. Every scan
// of it, whole or page by page, filtered by kind, by key or by an id
// range, reads that and nothing else, on every backend.

// ruleTranscripts: every transcript scan reads as the rule derives it.
const ruleTranscripts oracleRule = "transcripts-by-the-rule"

// transcript is conv's transcript as the rule derives it.
func (m *stateModel) transcript(conv storage.ID) []*storage.Entry {
	var out []*storage.Entry
	for _, l := range m.chain(conv, 0) {
		for _, e := range m.entries[l.conv] {
			if e.ID <= l.cap {
				out = append(out, e)
			}
		}
	}
	slices.SortFunc(out, func(a, b *storage.Entry) int { return int(a.ID - b.ID) })
	return out
}

// holdTranscripts holds every conversation's scans to the rule: whole,
// page by page both ways and inside a window, filtered by each kind and
// by three of the keys it holds (the first, the last, one between), and over the middle third of its ids; and its
// newest head at the positions where it changes.
func (m *stateModel) holdTranscripts(ctx context.Context, store storage.Storage) error {
	for _, conv := range slices.Sorted(maps.Keys(m.convs)) {
		if m.deleted[conv] {
			continue
		}
		want := m.transcript(conv)
		scan := func(q storage.EntryQuery) func(storage.Cursor) (storage.Page[*storage.Entry], error) {
			return func(c storage.Cursor) (storage.Page[*storage.Entry], error) {
				q.ConversationID, q.Cursor = conv, c
				return store.ScanEntries(ctx, q)
			}
		}
		hold := func(what string, q storage.EntryQuery, want []*storage.Entry) error {
			got, err := storage.AllPages(scan(q))
			if err != nil {
				return broke(ruleTranscripts, "ScanEntries(conversation %d%s) fails: %v", conv, what, err)
			}
			if !sameEntries(want, got) {
				return broke(ruleTranscripts, "ScanEntries(conversation %d%s) reads %s, the rule %s", conv, what, showEntries(got), showEntries(want))
			}
			return nil
		}
		if err := hold("", storage.EntryQuery{}, want); err != nil {
			return err
		}
		if err := holdPages(ruleTranscripts, fmt.Sprintf("ScanEntries(conversation %d", conv), store.LastSeq(), want, scan(storage.EntryQuery{}),
			func(e *storage.Entry) storage.ID { return e.ID }, sameEntries, showEntries); err != nil {
			return err
		}
		kinds, keys := map[string]bool{}, map[string]bool{}
		for _, e := range want {
			kinds[e.Kind] = true
			if e.Key != "" {
				keys[e.Key] = true
			}
		}
		for _, kind := range slices.Sorted(maps.Keys(kinds)) {
			of := slices.DeleteFunc(slices.Clone(want), func(e *storage.Entry) bool { return e.Kind != kind })
			if err := hold(fmt.Sprintf(", kind %s", kind), storage.EntryQuery{Kind: kind}, of); err != nil {
				return err
			}
		}
		for _, key := range spread(slices.Sorted(maps.Keys(keys)), 3) {
			of := slices.DeleteFunc(slices.Clone(want), func(e *storage.Entry) bool { return e.Key != key })
			if err := hold(fmt.Sprintf(", key %s", key), storage.EntryQuery{Key: key}, of); err != nil {
				return err
			}
		}
		if err := holdHeads(ctx, store, conv, want); err != nil {
			return err
		}
		if n := len(want); n > 2 {
			from, through := want[n/3].ID, want[2*n/3].ID
			of := slices.DeleteFunc(slices.Clone(want), func(e *storage.Entry) bool { return e.ID < from || e.ID > through })
			if err := hold(fmt.Sprintf(", %d through %d", from, through), storage.EntryQuery{From: from, Through: through}, of); err != nil {
				return err
			}
		}
	}
	return nil
}

func sameEntries(a, b []*storage.Entry) bool {
	return slices.EqualFunc(a, b, func(x, y *storage.Entry) bool {
		return x.ID == y.ID && x.Kind == y.Kind && x.ConversationID == y.ConversationID
	})
}

func showEntries(es []*storage.Entry) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = fmt.Sprintf("%d:%s@%d", e.ID, e.Kind, e.ConversationID)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// holdHeads holds conv's NewestHead to the transcript: the newest entry
// with a head at or before each position where the answer may change
// (now, each head and the entry before it; at most statePositionsMax).
func holdHeads(ctx context.Context, store storage.Storage, conv storage.ID, transcript []*storage.Entry) error {
	ats := []storage.ID{0}
	for _, e := range transcript {
		if e.IsHead() {
			ats = append(ats, e.ID, e.ID-1)
		}
	}
	if len(ats) > statePositionsMax {
		ats = append(ats[:1], ats[len(ats)-statePositionsMax+1:]...)
	}
	for _, at := range ats {
		var want *storage.Entry
		for _, e := range transcript {
			if e.IsHead() && (at == 0 || e.ID <= at) {
				want = e
			}
		}
		got, ok, err := store.NewestHead(ctx, conv, at)
		switch {
		case err != nil:
			return broke(ruleTranscripts, "NewestHead(conversation %d at %d) fails: %v", conv, at, err)
		case ok != (want != nil) || ok && got.ID != want.ID:
			return broke(ruleTranscripts, "NewestHead(conversation %d at %d) reads %s, the rule %s", conv, at, showEntries(heads(got, ok)), showEntries(heads(want, want != nil)))
		}
	}
	return nil
}

func heads(e *storage.Entry, ok bool) []*storage.Entry {
	if !ok {
		return nil
	}
	return []*storage.Entry{e}
}

// spread is at most n of keys, the first, the last and between.
func spread(keys []string, n int) []string {
	if len(keys) <= n {
		return keys
	}
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, keys[i*(len(keys)-1)/(n-1)])
	}
	return out
}
