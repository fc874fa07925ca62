package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/storage"
)

// The conversation rule: the conversations a session lists are the ones
// its batches created and did not delete (§2.1), each as created: the
// whole list, each conversation's forks (ScanConversations by Parent),
// the conversations its tasks own (by OwnedFrom: an owner task of that
// conversation), and each deleted one is gone for GetConversations too,
// its transcript and newest head refused as a bad query.
// It is checked after every delete a program makes, and at a run's end;
// the harness's paged listing (Harness.Conversations, with the
// conversations owned by nobody too) after every action of a program that
// makes or deletes a conversation.

// ruleConversations: the conversations listed are the rule's.
const ruleConversations oracleRule = "conversations-by-the-rule"

// everHadTasks reports whether any task the oracle saw made was made in
// conversation conv or a conversation it owns, at any depth: a delete
// may be refused only for one of them, live or running (§6.4). A task
// made by a commit the oracle missed was read back by its resync.
func (o *oracle) everHadTasks(conv storage.ID) bool {
	subtree := map[storage.ID]bool{conv: true}
	for grew := true; grew; {
		grew = false
		for _, c := range o.created {
			if owner := o.owners[c]; owner != 0 && !subtree[c] && subtree[o.convs[owner]] {
				subtree[c], grew = true, true
			}
		}
	}
	for _, c := range o.convs {
		if subtree[c] {
			return true
		}
	}
	return false
}

// conversationsChecked holds store's conversation reads to the rule,
// recording the first violation.
func (o *oracle) conversationsChecked(ctx context.Context, store storage.Storage, after string) error {
	problem, err := conversationsProblem(ctx, store, o.transcripts, o.convs)
	if err != nil || problem == "" {
		return err
	}
	return o.fail(broke(ruleConversations, "after %s: %s", after, problem))
}

// listingChecked holds the harness's conversation listing (Harness.
// Conversations) to the rule, paged a few at a time both ways: the
// conversations owned by nobody, each conversation's forks and those its
// tasks own. Every page is ascending and, but for an empty listing's
// only page, not empty; the pages follow on in their direction; the last
// has no Next.
func (o *oracle) listingChecked(ctx context.Context, list conversationLister, after string) error {
	want := slices.SortedFunc(maps.Values(o.transcripts.convs), func(a, b storage.Conversation) int { return int(a.ID - b.ID) })
	limit := 1 + len(want)%3
	check := func(what string, f core.ConversationFilter, want []storage.Conversation) error {
		for _, backward := range []bool{false, true} {
			got, problem, err := pageAll(ctx, list, f, limit, backward)
			if err != nil {
				return err
			}
			if problem == "" && !sameConversations(got, want) {
				problem = fmt.Sprintf("lists %s; its batches leave %s", describeConversations(got), describeConversations(want))
			}
			if problem != "" {
				return o.fail(broke(ruleConversations, "after %s: the harness, paging %s %d at a time (backward %v), %s", after, what, limit, backward, problem))
			}
		}
		return nil
	}
	var independent []storage.Conversation
	for _, c := range want {
		if c.Owner == 0 {
			independent = append(independent, c)
		}
	}
	if err := check("the conversations owned by nobody", core.ConversationFilter{Independent: true}, independent); err != nil {
		return err
	}
	for _, c := range want {
		var forks, owned []storage.Conversation
		for _, x := range want {
			if x.Parent != nil && x.Parent.ConversationID == c.ID {
				forks = append(forks, x)
			}
			if x.Owner != 0 && o.convs[x.Owner] == c.ID {
				owned = append(owned, x)
			}
		}
		if err := check(fmt.Sprintf("conversation %d's forks", c.ID), core.ConversationFilter{Parent: c.ID}, forks); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("the conversations conversation %d's tasks own", c.ID), core.ConversationFilter{OwnedFrom: c.ID}, owned); err != nil {
			return err
		}
	}
	return nil
}

// conversationLister pages conversations as Harness.Conversations does.
type conversationLister func(context.Context, core.ConversationFilter) (storage.Page[storage.Conversation], error)

// pageAll reads every page of f, limit at a time, forward or backward,
// and returns the conversations ascending, or what is wrong with the pages.
func pageAll(ctx context.Context, list conversationLister, f core.ConversationFilter, limit int, backward bool) ([]storage.Conversation, string, error) {
	f.Cursor = storage.Cursor{Limit: limit}
	if backward {
		f.Before = math.MaxInt64
	}
	var pages [][]storage.Conversation
	var readAt storage.ID
	for n := 0; ; n++ {
		p, err := list(ctx, f)
		if err != nil {
			return nil, "", err
		}
		// Every page says when it was read, and a session's sequence
		// never goes back: its root was made before any read.
		switch {
		case p.ReadAt == 0:
			return nil, fmt.Sprintf("gave page %d without the position it was read at", n+1), nil
		case p.ReadAt < readAt:
			return nil, fmt.Sprintf("gave page %d read at %d, after a page read at %d", n+1, p.ReadAt, readAt), nil
		}
		readAt = p.ReadAt
		ids := make([]storage.ID, len(p.Items))
		for i, c := range p.Items {
			ids[i] = c.ID
		}
		switch {
		case len(p.Items) > limit:
			return nil, fmt.Sprintf("gave a page of %d", len(p.Items)), nil
		case !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids):
			return nil, fmt.Sprintf("gave the page %v, not ascending", ids), nil
		case len(p.Items) == 0 && (n > 0 || p.Next != 0):
			return nil, fmt.Sprintf("gave an empty page (page %d, next %d)", n+1, p.Next), nil
		case len(pages) > 0 && len(p.Items) > 0 && (backward && p.Items[len(p.Items)-1].ID >= pages[len(pages)-1][0].ID ||
			!backward && p.Items[0].ID <= last(pages[len(pages)-1]).ID):
			return nil, fmt.Sprintf("gave the page %v, which does not follow on", ids), nil
		}
		pages = append(pages, p.Items)
		if p.Next == 0 {
			break
		}
		if n > 10_000 {
			return nil, "never ends", nil
		}
		if backward {
			f.Before = p.Next
		} else {
			f.After = p.Next
		}
	}
	if backward {
		slices.Reverse(pages)
	}
	return slices.Concat(pages...), "", nil
}

// last is the last of a non-empty slice.
func last[T any](s []T) T { return s[len(s)-1] }

// conversationsProblem compares store's conversation reads with the
// conversations t holds, convOf naming each owner task's conversation; ""
// when they agree.
func conversationsProblem(ctx context.Context, store storage.Storage, t *transcripts, convOf map[storage.ID]storage.ID) (string, error) {
	scan := func(q storage.ConversationQuery) ([]storage.Conversation, error) {
		return storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
			q.Cursor = c
			return store.ScanConversations(ctx, q)
		})
	}
	byID := func(cs []storage.Conversation) []storage.Conversation {
		return slices.SortedFunc(slices.Values(cs), func(a, b storage.Conversation) int { return int(a.ID - b.ID) })
	}
	want := byID(slices.Collect(maps.Values(t.convs)))
	all, err := scan(storage.ConversationQuery{})
	if err != nil {
		return "", err
	}
	if got := byID(all); !sameConversations(got, want) {
		return fmt.Sprintf("the session lists the conversations %s; its batches leave %s", describeConversations(got), describeConversations(want)), nil
	}
	for _, c := range want {
		var forks, owned []storage.Conversation
		for _, x := range want {
			if x.Parent != nil && x.Parent.ConversationID == c.ID {
				forks = append(forks, x)
			}
			if x.Owner != 0 && convOf[x.Owner] == c.ID {
				owned = append(owned, x)
			}
		}
		got, err := scan(storage.ConversationQuery{Parent: c.ID})
		if err != nil {
			return "", err
		}
		if got = byID(got); !sameConversations(got, forks) {
			return fmt.Sprintf("conversation %d's forks are listed as %s; its batches leave %s", c.ID, describeConversations(got), describeConversations(forks)), nil
		}
		if got, err = scan(storage.ConversationQuery{OwnedFrom: c.ID}); err != nil {
			return "", err
		}
		if got = byID(got); !sameConversations(got, owned) {
			return fmt.Sprintf("the conversations conversation %d's tasks own are listed as %s; its batches leave %s", c.ID, describeConversations(got), describeConversations(owned)), nil
		}
	}
	var gone []storage.ID
	for id := range t.deleted {
		gone = append(gone, id)
	}
	slices.Sort(gone)
	found, err := store.GetConversations(ctx, gone)
	if err != nil {
		return "", err
	}
	for _, id := range gone {
		if _, ok := found[id]; ok {
			return fmt.Sprintf("conversation %d, deleted, is still there for GetConversations", id), nil
		}
		// A read of its transcript or its head is a bad query.
		if _, err := store.ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 1}, ConversationID: id}); !errors.Is(err, storage.ErrBadQuery) {
			return fmt.Sprintf("conversation %d, deleted, has its transcript read (%v), not refused as a bad query", id, err), nil
		}
		if _, _, err := store.NewestHead(ctx, id, 0); !errors.Is(err, storage.ErrBadQuery) {
			return fmt.Sprintf("conversation %d, deleted, has its newest head read (%v), not refused as a bad query", id, err), nil
		}
	}
	return "", nil
}

// sameConversations reports whether a and b are the same conversations,
// nil and empty alike.
func sameConversations(a, b []storage.Conversation) bool {
	return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b)
}

// describeConversations lists conversations by id, a fork with its parent
// and point, an owned one with its owner task.
func describeConversations(cs []storage.Conversation) string {
	out := "["
	for i, c := range cs {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprint(c.ID)
		if c.Parent != nil {
			out += fmt.Sprintf("(fork of %d at %d)", c.Parent.ConversationID, c.Parent.At)
		}
		if c.Owner != 0 {
			out += fmt.Sprintf("(owned by task %d)", c.Owner)
		}
	}
	return out + "]"
}
