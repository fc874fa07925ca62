package main

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/pico-go/pico/storage"
)

// The conversation rule: the conversations a session lists are the ones
// its batches created and did not delete (§2.1), each as created: the
// whole list, each conversation's forks (ScanConversations by Parent),
// the conversations its tasks own (by OwnedFrom: an owner task of that
// conversation), and each deleted one is gone for GetConversations too.
// It is checked after every delete a program makes, and at a run's end.

// ruleConversations: the conversations listed are the rule's.
const ruleConversations oracleRule = "conversations-by-the-rule"

// conversationsChecked holds store's conversation reads to the rule,
// recording the first violation.
func (o *oracle) conversationsChecked(ctx context.Context, store storage.Storage, after string) error {
	problem, err := conversationsProblem(ctx, store, o.transcripts, o.convs)
	if err != nil || problem == "" {
		return err
	}
	return o.fail(broke(ruleConversations, "after %s: %s", after, problem))
}

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
