package main

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The model rule (§5.2, §8.2): a generation captures its conversation's
// configuration in the commit that creates it, and every attempt of it
// asks the model that configuration names; so does a collapse.
//
//   - The configuration a generation's state records is what the store
//     holds for its conversation just after the commit that creates it:
//     the model reference, thinking level, profile and tool selection (a
//     selection never written is null, not empty), and the tool budget
//     (the default when none is set). A generation that takes a turn on
//     after a collapse (one made first at the threshold, or for an
//     overflow) is that turn's retry: it keeps the configuration of the
//     generation that started the turn, as any retry does.
//   - A request goes to the model the reference resolves to among the
//     models the run's provider serves (no reference: the first), with
//     the captured thinking level; a reference no model answers sends no
//     request at all.
//   - A usage row of the generation names that model, or the reference's
//     own id when nothing serves it.
//   - A subagent's child conversation holds its parent's model, thinking
//     level, profile and tool budget as it is made.
//   - A collapse records the model and thinking level its conversation
//     holds as it is created, and its summarizer's request asks that
//     model (summarizerrule.go).

// ruleModel: a generation takes its conversation's configuration and asks
// the model it names.
const ruleModel oracleRule = "a-generation-asks-the-model-its-conversation-names"

// toolBudgetDefaultMs is the tool budget of a conversation that sets none.
const toolBudgetDefaultMs = 180_000

// configCaptured holds each generation batch b creates to what store holds
// of its conversation's configuration just after the commit, and notes
// the configuration for the request and usage checks. A store that fails
// to answer gives no verdict.
func (o *oracle) configCaptured(ctx context.Context, store storage.Storage, b storage.CommitBatch, r storage.Range, by string) error {
	for i, w := range b.Writes {
		if w.Type == storage.WriteCreateConversation && w.Conversation != nil && w.Conversation.Owner != 0 {
			if err := o.childConfig(ctx, store, w.Conversation, by, r.First+storage.ID(i)); err != nil {
				return err
			}
			continue
		}
		if w.Type == storage.WriteTask && w.Task != nil && w.Task.Kind == agent.CollapseKindName {
			if err := o.collapseConfig(ctx, store, w.Task, by, r.First+storage.ID(i)); err != nil {
				return err
			}
			continue
		}
		var st agent.GenerationState
		if w.Type != storage.WriteTask || w.Task == nil || w.Task.Kind != agent.GenerationKindName || json.Unmarshal(w.Task.State, &st) != nil {
			continue
		}
		o.configs[w.Task.ID] = st.Config
		seq := r.First + storage.ID(i)
		if st.AfterCollapse != 0 || st.OverflowRetried {
			if started, known := o.turnConfig(st.Inputs); known && !sameConfig(st.Config, started) {
				return o.fail(broke(ruleModel, "%s created generation %d at %d, which retries the turn of input %d after a collapse, with the configuration %s; the turn started with %s",
					by, w.Task.ID, seq, st.Inputs[0], configText(st.Config), configText(started)))
			}
			continue
		}
		if len(st.Inputs) > 0 {
			o.turnConfigs[st.Inputs[0]] = st.Config
		}
		held, ok := heldConfig(ctx, store, w.Task.ConversationID)
		if ok && !sameConfig(st.Config, held) {
			return o.fail(broke(ruleModel, "%s created generation %d at %d with the configuration %s; conversation %d holds %s",
				by, w.Task.ID, seq, configText(st.Config), w.Task.ConversationID, configText(held)))
		}
	}
	return nil
}

// childConfig holds a subagent's child conversation, created at seq, to
// its parent's model, thinking level, profile and tool budget, which the
// child inherits (its tool selection may be the call's own).
func (o *oracle) childConfig(ctx context.Context, store storage.Storage, child *storage.Conversation, by string, seq storage.ID) error {
	launch, ok := o.launches[child.Owner]
	if !ok {
		return nil
	}
	held, ok := heldConfig(ctx, store, child.ID)
	parent, known := heldConfig(ctx, store, launch.parent)
	held.SelectedTools, parent.SelectedTools = nil, nil
	if ok && known && !sameConfig(held, parent) {
		return o.fail(broke(ruleModel, "%s made subagent conversation %d at %d with the configuration %s; its parent %d holds %s",
			by, child.ID, seq, configText(held), launch.parent, configText(parent)))
	}
	return nil
}

// collapseConfig holds a collapse, created at seq, to the model and
// thinking level store holds for its conversation just after.
func (o *oracle) collapseConfig(ctx context.Context, store storage.Storage, t *storage.Task, by string, seq storage.ID) error {
	var st agent.CollapseState
	if json.Unmarshal(t.State, &st) != nil {
		return nil
	}
	held, ok := heldConfig(ctx, store, t.ConversationID)
	if ok && (st.Model != held.Model || st.Thinking != held.Thinking) {
		return o.fail(broke(ruleModel, "%s created collapse %d at %d for model %+v thinking %q; conversation %d holds %+v thinking %q",
			by, t.ID, seq, st.Model, st.Thinking, t.ConversationID, held.Model, held.Thinking))
	}
	return nil
}

// turnConfig is the configuration the newest generation of the turn of
// inputs (named by its first input) that was not a retry captured.
func (o *oracle) turnConfig(inputs []storage.ID) (agent.GenerationConfig, bool) {
	if len(inputs) == 0 {
		return agent.GenerationConfig{}, false
	}
	c, ok := o.turnConfigs[inputs[0]]
	return c, ok
}

// heldConfig is the generation configuration store holds for conv, read
// value by value; false when the store fails or a value does not decode.
func heldConfig(ctx context.Context, store storage.Storage, conv storage.ID) (agent.GenerationConfig, bool) {
	var c agent.GenerationConfig
	for _, v := range []struct {
		addr storage.Address
		into any
	}{
		{agent.ModelValue.Address, &c.Model}, {agent.ThinkingValue.Address, &c.Thinking},
		{agent.ProfileValue.Address, &c.Profile}, {agent.SelectedToolsValue.Address, &c.SelectedTools},
		{agent.ToolBudgetValue.Address, &c.BudgetMs},
	} {
		v.addr.Scope.ID = conv
		got, ok, err := store.GetValue(ctx, v.addr, 0)
		if err != nil {
			return c, false
		}
		if ok && json.Unmarshal(got.Value, v.into) != nil {
			return c, false
		}
	}
	if c.BudgetMs <= 0 {
		c.BudgetMs = toolBudgetDefaultMs
	}
	return c, true
}

// sameConfig reports whether two configurations agree, a null tool
// selection differing from an empty one.
func sameConfig(a, b agent.GenerationConfig) bool {
	return a.Model == b.Model && a.Thinking == b.Thinking && a.Profile == b.Profile && a.BudgetMs == b.BudgetMs &&
		(a.SelectedTools == nil) == (b.SelectedTools == nil) && slices.Equal(a.SelectedTools, b.SelectedTools)
}

func configText(c agent.GenerationConfig) string {
	text, _ := json.Marshal(c)
	return string(text)
}

// resyncConfigs reads the live generations' configurations from a
// restarted process's store, which may hold creations the oracle never
// saw commit.
func (o *oracle) resyncConfigs(tasks []*storage.Task) {
	for _, t := range tasks {
		var st agent.GenerationState
		if t.Kind == agent.GenerationKindName && json.Unmarshal(t.State, &st) == nil {
			o.configs[t.ID] = st.Config
		}
	}
}

// servedModel is the model ref resolves to among the served models: the
// first for no reference, else the first of its id (and provider, when
// it names one).
func servedModel(models []ai.Model, ref agent.ModelRef) (ai.Model, bool) {
	for _, m := range models {
		if ref == (agent.ModelRef{}) || m.ID == ref.ModelID && (ref.Provider == "" || m.Provider == ref.Provider) {
			return m, true
		}
	}
	return ai.Model{}, false
}

// modelAsked holds a request generation task sent to the model and
// thinking level its configuration names.
func (o *oracle) modelAsked(task storage.ID, req ai.Request) error {
	cfg, known := o.configs[task]
	if !known || o.models == nil {
		return nil
	}
	want, served := servedModel(o.models, cfg.Model)
	switch {
	case !served:
		return o.fail(broke(ruleModel, "generation %d asked model %s/%s; its configuration names %+v, which no model of the run answers",
			task, req.Model.Provider, req.Model.ID, cfg.Model))
	case req.Model.ID != want.ID || req.Model.Provider != want.Provider:
		return o.fail(broke(ruleModel, "generation %d asked model %s/%s; its configuration names %+v, which is %s/%s",
			task, req.Model.Provider, req.Model.ID, cfg.Model, want.Provider, want.ID))
	case req.ThinkingLevel != cfg.Thinking:
		return o.fail(broke(ruleModel, "generation %d asked with thinking %q; its configuration says %q", task, req.ThinkingLevel, cfg.Thinking))
	}
	return nil
}

// usageModel holds a generation's usage row, appended at seq, to the
// model its configuration resolves to (or names, when nothing serves it).
func (o *oracle) usageModel(row agent.UsageRow, by string, seq storage.ID) error {
	cfg, known := o.configs[row.TaskID]
	if !known || o.models == nil || row.Kind != agent.GenerationKindName {
		return nil
	}
	want := cfg.Model.ModelID
	if m, served := servedModel(o.models, cfg.Model); served {
		want = m.ID
	}
	if row.Model != want {
		return o.fail(broke(ruleModel, "%s recorded generation %d's usage at %d for model %q; its configuration names %+v, which is %q",
			by, row.TaskID, seq, row.Model, cfg.Model, want))
	}
	return nil
}
