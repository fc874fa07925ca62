package kit

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// outcome reads the session's observable outcome (ids as this
// implementation numbers them; Normalize renames them).
func (se *session) outcome(ctx context.Context) (Outcome, error) {
	o := Outcome{Actions: se.actions}
	store := se.h.Store()
	convs, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
		return store.ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
	})
	if err != nil {
		return o, err
	}
	for _, c := range convs {
		co, err := se.conversation(ctx, c)
		if err != nil {
			return o, fmt.Errorf("conversation %d: %w", c.ID, err)
		}
		o.Conversations = append(o.Conversations, co)
	}
	usage, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Element], error) {
		return store.ReadList(ctx, agent.UsageList.Address, storage.ListQuery{Cursor: c})
	})
	if err != nil {
		return o, err
	}
	for _, el := range usage {
		var row agent.UsageRow
		if err := json.Unmarshal(el.Value, &row); err != nil {
			return o, fmt.Errorf("usage row %d: %w", el.ID, err)
		}
		se.note("usage-row", el.Value)
		u := UsageOutcome{Conversation: idOf(row.ConversationID), Task: idOf(row.TaskID), Kind: row.Kind,
			Attempt: row.Attempt, Outcome: row.Outcome, Known: row.Usage != nil}
		if row.Usage != nil {
			u.Output = row.Usage.Output
		}
		o.Usage = append(o.Usage, u)
	}
	for _, w := range se.watches {
		o.Watches = append(o.Watches, WatchOutcome{Conversation: idOf(w.conv), Commits: w.commits})
	}
	return o, nil
}

func (se *session) conversation(ctx context.Context, c storage.Conversation) (ConversationOutcome, error) {
	store := se.h.Store()
	se.note("conversation", c)
	co := ConversationOutcome{ID: idOf(c.ID)}
	if c.Parent != nil {
		co.Parent = &struct {
			Conversation ID `json:"conversation"`
			At           ID `json:"at,omitempty"`
		}{idOf(c.Parent.ConversationID), optID(c.Parent.At)}
	}
	co.Owner = optID(c.Owner)
	entries, err := storage.AllPages(func(cur storage.Cursor) (storage.Page[*storage.Entry], error) {
		return store.ScanEntries(ctx, storage.EntryQuery{Cursor: cur, ConversationID: c.ID})
	})
	if err != nil {
		return co, err
	}
	for _, e := range entries {
		if e.ConversationID == c.ID { // its own, not inherited
			se.note("entry", e)
			co.Entries = append(co.Entries, entryOutcome(e))
		}
	}
	tasks, err := storage.AllPages(func(cur storage.Cursor) (storage.Page[*storage.Task], error) {
		return store.ScanTasks(ctx, storage.TaskQuery{Cursor: cur, ConversationIDs: []storage.ID{c.ID}})
	})
	if err != nil {
		return co, err
	}
	slices.SortFunc(tasks, func(a, b *storage.Task) int { return int(a.ID - b.ID) })
	for _, t := range tasks {
		se.note("task", t)
		co.Tasks = append(co.Tasks, taskOutcome(t))
	}
	if co.Inputs, err = inputOutcomes(ctx, store, c.ID, se.note); err != nil {
		return co, err
	}
	view, err := se.finalView(ctx, c.ID)
	if err != nil {
		return co, err
	}
	se.note("conversation-view", view)
	for _, el := range view.Inbox {
		se.note("inbox-item", el.Value)
	}
	co.View = viewOutcome(view)
	return co, nil
}

// finalView is the fold of the conversation's watch, held to a fresh
// capture (the watch oracle); a conversation the program never named (a
// subagent's child) has only the capture.
func (se *session) finalView(ctx context.Context, conv storage.ID) (*core.ConversationView, error) {
	fresh, err := se.h.Watch(ctx, conv, core.WatchOptions{Tail: se.swarm.Tail})
	if err != nil {
		return nil, err
	}
	defer fresh.Unsubscribe()
	w := se.views[conv]
	if w == nil {
		return fresh.View(), nil
	}
	got, want := viewOutcome(w.View()), viewOutcome(fresh.View())
	if !reflect.DeepEqual(got, want) {
		return nil, fmt.Errorf("the watch's fold %+v differs from a fresh capture %+v", got, want)
	}
	return w.View(), nil
}

// note hands a record to the session's recorder, if any.
func (se *session) note(schema string, v any) {
	if se.record != nil {
		se.record(schema, v)
	}
}

func viewOutcome(v *core.ConversationView) ViewOutcome {
	var out ViewOutcome
	for _, id := range v.Context {
		out.Context = append(out.Context, idOf(id))
	}
	for _, el := range v.Inbox {
		out.Inbox = append(out.Inbox, idOf(el.ID))
	}
	for _, t := range v.Tasks {
		out.Tasks = append(out.Tasks, idOf(t.ID))
	}
	for _, e := range v.Entries {
		out.Entries = append(out.Entries, idOf(e.ID))
	}
	return out
}

func optID(id storage.ID) ID {
	if id == 0 {
		return ""
	}
	return idOf(id)
}

func entryOutcome(e *storage.Entry) EntryOutcome {
	out := EntryOutcome{ID: idOf(e.ID), Kind: e.Kind, ByTask: optID(e.ByTaskID), Key: e.Key, Data: e.Data, Head: optID(e.Head)}
	for _, m := range e.Model {
		out.Model = append(out.Model, messageOutcome(m))
	}
	for _, ed := range e.Edits {
		out.Edits = append(out.Edits, EditOutcome{Type: string(ed.Action), Target: idOf(ed.Target)})
	}
	return out
}

func messageOutcome(m ai.Message) MessageOutcome {
	out := MessageOutcome{Role: string(m.Role), IsError: m.IsError != nil && *m.IsError}
	var text []string
	for _, b := range m.Content.Blocks {
		switch b.Type {
		case ai.BlockText:
			text = append(text, b.Text)
		case ai.BlockToolCall:
			out.Calls = append(out.Calls, fmt.Sprintf("%s(%s)", b.Name, b.ID))
		}
	}
	out.Text = strings.Join(text, "")
	return out
}

func taskOutcome(t *storage.Task) TaskOutcome {
	out := TaskOutcome{ID: idOf(t.ID), Kind: t.Kind, Status: t.Status, Background: t.Background, Abort: t.Abort}
	for _, id := range t.After {
		out.After = append(out.After, idOf(id))
	}
	for _, id := range t.Owns {
		out.Owns = append(out.Owns, idOf(id))
	}
	var st struct {
		Reason   string `json:"reason"`
		ExitCode *int   `json:"exitCode"`
		Runs     int    `json:"runs"`
	}
	if json.Unmarshal(t.State, &st) == nil {
		out.Reason = st.Reason
		if t.Kind == agent.JobKindName {
			out.ExitCode, out.Runs = st.ExitCode, st.Runs
		}
	}
	return out
}

// inputOutcomes reads the conversation's input results, by input id.
func inputOutcomes(ctx context.Context, store storage.Storage, conv storage.ID, note func(string, any)) ([]InputOutcome, error) {
	var out []InputOutcome
	var ids []int64
	results := map[int64]agent.InputResult{}
	if err := agent.EachInputResult(ctx, store, conv, func(id storage.ID, r agent.InputResult, raw json.RawMessage) {
		note("input-result", raw)
		ids, results[int64(id)] = append(ids, int64(id)), r
	}); err != nil {
		return nil, err
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := results[id]
		out = append(out, InputOutcome{ID: idOf(storage.ID(id)), Status: string(r.Status), RequestID: r.RequestID,
			Placement: optID(r.PlacementEntryID), Result: optID(r.ResultEntryID), Reason: r.Reason})
	}
	return out, nil
}
