package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// keepContext is a context after its head, built from its rows; every
// text is 40 characters, 10 tokens.
func keepContext(rows ...keepRow) ([]ruleEntry, []*storage.Entry) {
	var cx []ruleEntry
	var entries []*storage.Entry
	for _, r := range rows {
		cx = append(cx, ruleEntry{ID: r.id, Messages: []ai.Message{r.msg}})
		entries = append(entries, &storage.Entry{ID: r.id, ConversationID: 1, Kind: r.kind, Key: r.key})
	}
	return cx, entries
}

type keepRow struct {
	id   storage.ID
	kind string
	key  string
	msg  ai.Message
}

var tenTokens = strings.Repeat("word ", 8)

func keepUser(id storage.ID) keepRow {
	return keepRow{id: id, kind: "user", msg: ai.Message{Role: ai.RoleUser, Content: ai.PlainText(tenTokens)}}
}

func keepAnswer(id storage.ID, calls ...string) keepRow {
	m := ai.Message{Role: ai.RoleAssistant, Content: ai.PlainText(tenTokens)}
	for _, c := range calls {
		m.Content.Blocks = append(m.Content.Blocks, ai.ToolCall(c, "a", nil))
	}
	return keepRow{id: id, kind: "assistant", msg: m}
}

func keepResult(id storage.ID, call string) keepRow {
	return keepRow{id: id, kind: core.ToolResultKind.Kind(), key: call, msg: ai.Message{Role: ai.RoleToolResult, Content: ai.PlainText(tenTokens)}}
}

func keepSystem(id storage.ID) keepRow {
	return keepRow{id: id, kind: core.SystemKind.Kind(), msg: ai.Message{Role: ai.RoleSystem, Content: ai.PlainText(tenTokens)}}
}

// The rule's cut keeps the newest units that fit, always the newest one,
// moves on past a call whose result comes later, never summarizes the
// newest exchange's call without its result, and makes no collapse of a
// context that fits or has one unit.
func TestTheKeepRuleCutsWhereTheTokensRunOut(t *testing.T) {
	exchange := []keepRow{keepUser(10), keepAnswer(11, "c1"), keepResult(12, "c1"), keepAnswer(13), keepUser(14), keepAnswer(15)}
	cases := []struct {
		name          string
		rows          []keepRow
		keep          int64
		through, from storage.ID
		none          bool
	}{
		// Units: [10 11 12] (31 tokens: the call adds a character),
		// [13], [14 15].
		{name: "nothing to keep keeps the newest unit", rows: exchange, keep: 0, through: 13, from: 14},
		{name: "room for the newest unit alone", rows: exchange, keep: 29, through: 13, from: 14},
		{name: "room for two units", rows: exchange, keep: 30, through: 12, from: 13},
		{name: "room for all makes none", rows: exchange, keep: 61, none: true},
		{name: "one unit makes none", rows: exchange[4:], keep: 0, none: true},
		{name: "a system entry goes with what follows it", rows: []keepRow{keepUser(10), keepAnswer(11), keepSystem(12), keepUser(13), keepAnswer(14)},
			keep: 0, through: 11, from: 12},
		{name: "a result that lands later moves the cut on", rows: []keepRow{
			keepUser(10), keepAnswer(11, "c1"), keepUser(12), keepAnswer(13), keepResult(14, "c1"), keepUser(15), keepAnswer(16)},
			keep: 50, through: 14, from: 15},
		{name: "the newest exchange's call without its result is not summarized", rows: []keepRow{
			keepUser(10), keepAnswer(11, "c1"), keepUser(12), keepAnswer(13)}, keep: 0, none: true},
		{name: "an older exchange's call without its result may be", rows: []keepRow{
			keepUser(10), keepAnswer(11, "c1"), keepUser(12), keepAnswer(13, "c2"), keepResult(14, "c2"), keepUser(15), keepAnswer(16)},
			keep: 0, through: 14, from: 15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cx, entries := keepContext(tc.rows...)
			through, from, ok := planKeep(cx, entries, tc.keep)
			switch {
			case tc.none && ok:
				t.Fatalf("cut after %d keeping from %d; want no collapse", through, from)
			case !tc.none && (!ok || through != tc.through || from != tc.from):
				t.Fatalf("cut after %d keeping from %d (%v); want after %d keeping from %d", through, from, ok, tc.through, tc.from)
			}
		})
	}
}

// A collapse's keepRecent is its conversation's newest write as of the
// position, a fork's its parent's as of the fork point until it writes its
// own, the default before any write or after a delete, and for one a
// generation starts at most half the tokens its context must fit in.
func TestTheKeepRuleReadsKeepRecentAsOfItsPosition(t *testing.T) {
	o := newOracle()
	o.window = 1000
	o.transcripts.convs[1] = storage.Conversation{ID: 1}
	o.transcripts.convs[2] = storage.Conversation{ID: 2, Parent: &storage.ParentRef{ConversationID: 1, At: 15}}
	write := func(ns string, conv, seq storage.ID, v string) {
		addr := storage.Address{Scope: storage.ConversationScope(conv), Namespace: ns}
		w := storage.Write{Type: storage.WriteValueSet, Addr: &addr, Value: []byte(v)}
		if v == "" {
			w.Type = storage.WriteValueDelete
		}
		o.settingWritten(w, seq)
	}
	keep, threshold := agent.CollapseKeepRecentValue.Namespace, agent.CollapseThresholdValue.Namespace
	write(keep, 1, 10, "100")
	write(keep, 1, 20, "200")
	write(keep, 2, 30, "300")
	write(keep, 1, 40, "")
	write(threshold, 1, 12, "0.1")
	manual, auto, overflow := agent.CollapseManual, agent.CollapseThreshold, agent.CollapseOverflow
	for _, c := range []struct {
		reason    agent.CollapseReason
		conv, pos storage.ID
		want      int64
	}{
		{manual, 1, 5, agent.CollapseKeepRecentDefault}, {manual, 1, 10, 100}, {manual, 1, 25, 200}, {manual, 1, 45, agent.CollapseKeepRecentDefault},
		{manual, 2, 25, 100}, {manual, 2, 35, 300}, {manual, 3, 35, agent.CollapseKeepRecentDefault},
		{auto, 1, 11, 0}, {auto, 1, 25, 50}, {auto, 2, 35, 50}, {overflow, 1, 25, 200}, {overflow, 1, 45, 500},
	} {
		if got, _ := o.keepRecentAt(c.reason, c.conv, c.pos); got != c.want {
			t.Errorf("%s keepRecent of %d at %d = %d; want %d", c.reason, c.conv, c.pos, got, c.want)
		}
	}
	o.window = 0
	if _, known := o.keepRecentAt(overflow, 1, 25); known {
		t.Error("an overflow's keepRecent is known without the model's window")
	}
}

// A host's collapse the harness found nothing to collapse in breaks the
// rule when the conversation's context, as of then, has a cut for its
// keepRecent, and holds when it fits whole.
func TestNothingToCollapseIsHeldToTheContext(t *testing.T) {
	o := newOracle()
	o.transcripts.convs[1] = storage.Conversation{ID: 1}
	for _, r := range []keepRow{keepUser(10), keepAnswer(11), keepUser(12), keepAnswer(13)} {
		o.transcripts.own[1] = append(o.transcripts.own[1], &storage.Entry{ID: r.id, ConversationID: 1, Kind: r.kind, Model: []ai.Message{r.msg}})
	}
	addr := agent.CollapseKeepRecentValue.In(1).Address
	o.settingWritten(storage.Write{Type: storage.WriteValueSet, Addr: &addr, Value: []byte("25")}, 5)
	holdsOrBreaks(t, o.nothingToCollapse(1, 20), ruleKeepRecent, true) // 40 tokens: the newest exchange is kept, the first cut
	o.settingWritten(storage.Write{Type: storage.WriteValueSet, Addr: &addr, Value: []byte("40")}, 30)
	holdsOrBreaks(t, o.nothingToCollapse(1, 35), ruleKeepRecent, false) // it fits whole
	holdsOrBreaks(t, o.nothingToCollapse(1, 11), ruleKeepRecent, false) // as of 11, one unit
}

// After a restart, a fork's collapse settings are its parent's as of the
// fork point (they are rewindable), as the store reads them, not the
// defaults: resyncSettings reads them with the settings' own addresses.
func TestResyncedForkInheritsItsSettings(t *testing.T) {
	ctx := context.Background()
	keep := agent.CollapseKeepRecentValue.Address
	keep.Scope = storage.ConversationScope(1)
	store := memory.New()
	for _, b := range []storage.CommitBatch{
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}},
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteValueSet, Addr: &keep, Value: json.RawMessage("27")}}},
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 3, ConversationID: 1, Kind: "user"}}}},
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 4, Parent: &storage.ParentRef{ConversationID: 1, At: 3}}}}},
	} {
		if _, err := store.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	o := newOracle()
	o.last = store.LastSeq()
	o.transcripts.convs[4] = storage.Conversation{ID: 4, Parent: &storage.ParentRef{ConversationID: 1, At: 3}}
	if err := o.resyncSettings(ctx, store, []storage.Conversation{{ID: 1}, {ID: 4, Parent: &storage.ParentRef{ConversationID: 1, At: 3}}}); err != nil {
		t.Fatal(err)
	}
	var got int64
	if !o.settingAt(agent.CollapseKeepRecentValue.Namespace, 4, o.last, &got) || got != 27 {
		t.Fatalf("the fork's keepRecent after a resync: %d; want its parent's 27", got)
	}
}
