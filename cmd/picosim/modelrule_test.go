package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// modelRuleStore is a store holding conversation 1, on model faux-2 with
// thinking high, and conversation 2, holding child's values (a
// subagent's child of task 5 in the batches the tests commit).
func modelRuleStore(t *testing.T, child map[storage.Address]string) storage.Storage {
	t.Helper()
	ctx := context.Background()
	store := memory.New()
	set := func(conv storage.ID, a storage.Address, v string) storage.Write {
		a.Scope.ID = conv
		return storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: json.RawMessage(v)}
	}
	ws := []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 2}},
		set(1, agent.ModelValue.Address, `{"modelId":"faux-2"}`), set(1, agent.ThinkingValue.Address, `"high"`),
	}
	for a, v := range child {
		ws = append(ws, set(2, a, v))
	}
	for i := range ws {
		if _, err := store.Commit(ctx, main1(ws[i])); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

func generationWrite(id, conv storage.ID, st agent.GenerationState) storage.Write {
	raw, _ := json.Marshal(st)
	return storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: id, ConversationID: conv, Kind: agent.GenerationKindName, State: raw}}
}

func wantModelRule(t *testing.T, what string, err error) {
	t.Helper()
	var oe *oracleError
	if !errors.As(err, &oe) || oe.Rule != ruleModel {
		t.Errorf("%s: %v; want the model rule", what, err)
	}
}

// A generation captures what its conversation holds as it is made; a
// collapse's retry keeps what its turn started with.
func TestTheModelRuleHoldsAGenerationToItsConversationsSettings(t *testing.T) {
	ctx := context.Background()
	store := modelRuleStore(t, nil)
	held := agent.GenerationConfig{Model: agent.ModelRef{ModelID: "faux-2"}, Thinking: "high", BudgetMs: toolBudgetDefaultMs}
	check := func(o *oracle, w storage.Write) error {
		return o.configCaptured(ctx, store, main1(w), storage.Range{First: 9, Last: 9}, "a host")
	}
	o := newOracle()
	if err := check(o, generationWrite(9, 1, agent.GenerationState{Inputs: []storage.ID{3}, Config: held})); err != nil {
		t.Fatalf("a generation taking what its conversation holds: %v", err)
	}
	for name, cfg := range map[string]agent.GenerationConfig{
		"the default model":            {Thinking: "high", BudgetMs: toolBudgetDefaultMs},
		"another thinking":             {Model: held.Model, Thinking: "low", BudgetMs: toolBudgetDefaultMs},
		"another budget":               {Model: held.Model, Thinking: "high", BudgetMs: 1},
		"an empty selection, not none": {Model: held.Model, Thinking: "high", BudgetMs: toolBudgetDefaultMs, SelectedTools: []string{}},
	} {
		wantModelRule(t, name, check(newOracle(), generationWrite(9, 1, agent.GenerationState{Inputs: []storage.ID{3}, Config: cfg})))
	}
	// The turn of input 3 started on held; its retry after a collapse
	// keeps it even where the conversation now says otherwise.
	started := agent.GenerationConfig{Model: agent.ModelRef{ModelID: "faux-1"}, BudgetMs: toolBudgetDefaultMs}
	o.turnConfigs[3] = started
	if err := check(o, generationWrite(10, 1, agent.GenerationState{Inputs: []storage.ID{3}, Config: started, AfterCollapse: 8})); err != nil {
		t.Fatalf("a retry keeping its turn's configuration: %v", err)
	}
	wantModelRule(t, "a retry taking the conversation's instead", check(o, generationWrite(11, 1, agent.GenerationState{Inputs: []storage.ID{3}, Config: held, OverflowRetried: true})))
	collapse := func(st agent.CollapseState) storage.Write {
		raw, _ := json.Marshal(st)
		return storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 12, ConversationID: 1, Kind: agent.CollapseKindName, State: raw}}
	}
	if err := check(newOracle(), collapse(agent.CollapseState{Model: held.Model, Thinking: "high"})); err != nil {
		t.Fatalf("a collapse taking its conversation's model: %v", err)
	}
	wantModelRule(t, "a collapse on the default model", check(newOracle(), collapse(agent.CollapseState{Thinking: "high"})))
}

// A subagent's child holds its parent's configuration from the commit
// that makes it.
func TestTheModelRuleHoldsAChildToItsParentsSettings(t *testing.T) {
	ctx := context.Background()
	check := func(child map[storage.Address]string) error {
		o := newOracle()
		o.launches[5] = spawnIntent{parent: 1}
		w := storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 2, Owner: 5}}
		return o.configCaptured(ctx, modelRuleStore(t, child), main1(w), storage.Range{First: 2, Last: 2}, "task 5's execute")
	}
	inherited := map[storage.Address]string{agent.ModelValue.Address: `{"modelId":"faux-2"}`, agent.ThinkingValue.Address: `"high"`}
	if err := check(inherited); err != nil {
		t.Fatalf("a child holding its parent's values: %v", err)
	}
	inherited[agent.SelectedToolsValue.Address] = `["a"]`
	if err := check(inherited); err != nil {
		t.Fatalf("a child with a selection of its own: %v", err)
	}
	wantModelRule(t, "a child holding nothing", check(nil))
	wantModelRule(t, "a child without the model", check(map[storage.Address]string{agent.ThinkingValue.Address: `"high"`}))
}

// A request asks the model and thinking level its generation captured; a
// model nobody serves asks nothing; a usage row names the model asked.
func TestTheModelRuleHoldsARequestToItsGenerationsModel(t *testing.T) {
	o := newOracle()
	o.models = []ai.Model{{ID: "faux-1", Provider: "faux"}, {ID: "faux-2", Provider: "faux"}}
	o.configs[7] = agent.GenerationConfig{Model: agent.ModelRef{ModelID: "faux-2"}, Thinking: "high"}
	o.configs[8] = agent.GenerationConfig{}
	o.configs[9] = agent.GenerationConfig{Model: agent.ModelRef{ModelID: "faux-9"}}
	ask := func(task storage.ID, model, thinking string) error {
		o.first = nil
		return o.modelAsked(task, ai.Request{Model: ai.Model{ID: model, Provider: "faux"}, ThinkingLevel: thinking})
	}
	if err := ask(7, "faux-2", "high"); err != nil {
		t.Fatalf("the configured model: %v", err)
	}
	if err := ask(8, "faux-1", ""); err != nil {
		t.Fatalf("no reference, the first model: %v", err)
	}
	if err := ask(6, "faux-1", ""); err != nil {
		t.Fatalf("a generation the rule never saw made: %v", err)
	}
	wantModelRule(t, "the default instead", ask(7, "faux-1", "high"))
	wantModelRule(t, "without its thinking", ask(7, "faux-2", ""))
	wantModelRule(t, "another for no reference", ask(8, "faux-2", ""))
	wantModelRule(t, "a model nobody serves", ask(9, "faux-1", ""))
	row := func(task storage.ID, model string) error {
		o.first = nil
		return o.usageModel(agent.UsageRow{TaskID: task, Kind: agent.GenerationKindName, Model: model}, "a task", 20)
	}
	for task, model := range map[storage.ID]string{7: "faux-2", 8: "faux-1", 9: "faux-9"} {
		if err := row(task, model); err != nil {
			t.Errorf("generation %d's row of %s: %v", task, model, err)
		}
	}
	wantModelRule(t, "a row of the default model", row(7, "faux-1"))
	wantModelRule(t, "a row of no model", row(8, ""))
	if p := summarizerProblem(ai.Request{Model: o.models[0]}, expectedSummary{model: o.models[1], modelKnown: true}); p == "" {
		t.Errorf("a summarizer asked the default model: no problem; want one")
	}
}
