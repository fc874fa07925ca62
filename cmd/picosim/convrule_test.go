package main

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// listsDeleted is a store whose conversation reads still list one deleted
// conversation: in whole scans, by Parent, or for GetConversations; or
// that reads its transcript or its head as if it were there.
type listsDeleted struct {
	*memory.Store
	gone  storage.Conversation
	where string
}

func (s listsDeleted) ScanConversations(ctx context.Context, q storage.ConversationQuery) (storage.Page[storage.Conversation], error) {
	p, err := s.Store.ScanConversations(ctx, q)
	if err == nil && (s.where == "scan" && q.Parent == 0 && q.OwnedFrom == 0 || s.where == "forks" && q.Parent == s.gone.Parent.ConversationID) {
		p.Items = append(p.Items, s.gone)
	}
	return p, err
}

func (s listsDeleted) GetConversations(ctx context.Context, ids []storage.ID) (map[storage.ID]storage.Conversation, error) {
	got, err := s.Store.GetConversations(ctx, ids)
	if err == nil && s.where == "get" {
		for _, id := range ids {
			if id == s.gone.ID {
				got[id] = s.gone
			}
		}
	}
	return got, err
}

func (s listsDeleted) ScanEntries(ctx context.Context, q storage.EntryQuery) (storage.Page[*storage.Entry], error) {
	if s.where == "entries" && q.ConversationID == s.gone.ID {
		return storage.Page[*storage.Entry]{}, nil
	}
	return s.Store.ScanEntries(ctx, q)
}

func (s listsDeleted) NewestHead(ctx context.Context, conv, at storage.ID) (*storage.Entry, bool, error) {
	if s.where == "head" && conv == s.gone.ID {
		return nil, false, nil
	}
	return s.Store.NewestHead(ctx, conv, at)
}

// The conversations a session lists are those its batches created and
// did not delete: a store that agrees passes; one that still lists a
// deleted fork (whole, among its parent's forks, or by id), or reads its
// transcript or head rather than refuse the query, breaks the rule, as
// does one that lost an owned conversation.
func TestTheConversationRuleHoldsWhatTheSessionLists(t *testing.T) {
	ctx := context.Background()
	fork := storage.Conversation{ID: 3, Parent: &storage.ParentRef{ConversationID: 1, At: 2}}
	child := storage.Conversation{ID: 6, Owner: 5}
	batches := []storage.CommitBatch{
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}},
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 2, ConversationID: 1, Kind: "user"}}}},
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &fork}}},
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteDeleteConversation, ID: 3}}},
		{Kind: storage.BatchMain, Writes: []storage.Write{
			{Type: storage.WriteTask, Task: &storage.Task{ID: 5, ConversationID: 1, Kind: "k", Status: "pending", Role: storage.RoleStart}},
			{Type: storage.WriteCreateConversation, Conversation: &child},
		}},
	}
	store := memory.New()
	o := newOracle()
	for _, b := range batches {
		if _, err := store.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
		o.transcripts.record(b)
		for _, w := range b.Writes {
			if w.Type == storage.WriteTask {
				o.convs[w.Task.ID] = w.Task.ConversationID
			}
		}
	}
	if err := o.conversationsChecked(ctx, store, "the test"); err != nil {
		t.Fatalf("the store that agrees: %v", err)
	}
	for _, where := range []string{"scan", "forks", "get", "entries", "head"} {
		o.first = nil
		var oe *oracleError
		err := o.conversationsChecked(ctx, listsDeleted{Store: store, gone: fork, where: where}, "the test")
		if !errors.As(err, &oe) || oe.Rule != ruleConversations || !strings.Contains(err.Error(), "3") {
			t.Errorf("a store that lists the deleted fork (%s): %v; want a %s violation naming it", where, err, ruleConversations)
		}
	}
	// The child is owned by task 5 of conversation 1: a rule that thinks
	// the task is another conversation's expects it elsewhere.
	o.first = nil
	o.convs[5] = 3
	var oe *oracleError
	if err := o.conversationsChecked(ctx, store, "the test"); !errors.As(err, &oe) || !strings.Contains(err.Error(), "own") {
		t.Errorf("owned conversations listed under the wrong conversation: %v; want a violation", err)
	}
}

// The harness's paged listing is held to the rule: a lister that pages
// as it should passes, both ways, a few at a time; one whose pages never
// continue, come unsorted, overlap, leave an empty page before the end,
// say no read position or one before its previous page's breaks it.
func TestThePagedListingIsHeldToTheRule(t *testing.T) {
	ctx := context.Background()
	o := newOracle()
	convs := []storage.Conversation{{ID: 1}, {ID: 3, Parent: &storage.ParentRef{ConversationID: 1, At: 2}},
		{ID: 6, Owner: 5}, {ID: 8}, {ID: 9, Parent: &storage.ParentRef{ConversationID: 1, At: 2}}}
	for _, c := range convs {
		o.transcripts.convs[c.ID] = c
	}
	o.convs[5] = 1
	// pages lists as Harness.Conversations should, then lets bad spoil a page.
	pages := func(bad string) conversationLister {
		return func(_ context.Context, f core.ConversationFilter) (storage.Page[storage.Conversation], error) {
			var match []storage.Conversation
			for _, c := range convs {
				lo, hi := f.Cursor.Bounds(0, 0)
				if c.ID < lo || c.ID > hi {
					continue
				}
				if f.Independent && c.Owner == 0 || f.Parent != 0 && c.Parent != nil && c.Parent.ConversationID == f.Parent ||
					f.OwnedFrom != 0 && c.Owner != 0 && o.convs[c.Owner] == f.OwnedFrom {
					match = append(match, c)
				}
			}
			if f.Backward() {
				slices.Reverse(match)
			}
			if len(match) > f.Limit+1 {
				match = match[:f.Limit+1]
			}
			p := storage.NewPage(f.Cursor, 10, match, func(c storage.Conversation) storage.ID { return c.ID })
			switch {
			case bad == "never continues":
				p.Next = 0
			case bad == "unsorted" && len(p.Items) > 1:
				p.Items[0], p.Items[1] = p.Items[1], p.Items[0]
			case bad == "overlaps" && p.Next != 0 && !f.Backward():
				p.Next--
			case bad == "empty page" && p.Next == 0 && len(p.Items) > 0 && f.After == 0 && f.Before == 0:
				p.Items, p.Next = []storage.Conversation{}, p.Items[0].ID-1
			case bad == "read at nothing" && f.Independent:
				p.ReadAt = 0
			case bad == "read earlier" && (f.After != 0 || f.Before != 0 && f.Before != math.MaxInt64):
				p.ReadAt = 9
			}
			return p, nil
		}
	}
	if err := o.listingChecked(ctx, pages(""), "the test"); err != nil {
		t.Fatalf("a listing that pages as it should: %v", err)
	}
	for _, bad := range []string{"never continues", "unsorted", "overlaps", "empty page", "read at nothing", "read earlier"} {
		o := *o
		o.first = nil
		holdsOrBreaks(t, o.listingChecked(ctx, pages(bad), "the test"), ruleConversations, true)
	}
}
