package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// The built-in task kinds' names (§9.5): whatever is registered under a
// name is what accept, prompt and post_tools create.
const (
	GenerationKindName = "generation"
	ToolKindName       = "tool"
	PostToolsKindName  = "post_tools"
)

// ModelRef names a model: a provider and its model id. The zero value means
// the first model the harness was given.
type ModelRef struct {
	Provider string `json:"provider,omitempty"`
	ModelID  string `json:"modelId,omitempty"`
}

// The generation's config (§5.2): rewindable conversation values, except the
// tool budget, which is the UI's present rather than the conversation's
// history.
var (
	ModelValue         = storage.ConversationValue[ModelRef]("pi.model", storage.Rewind)
	ThinkingValue      = storage.ConversationValue[string]("pi.thinking", storage.Rewind)
	SelectedToolsValue = storage.ConversationValue[[]string]("pi.tools.selected", storage.Rewind)
	ProfileValue       = storage.ConversationValue[string]("pi.prompt.profile", storage.Rewind)
	ToolBudgetValue    = storage.ConversationValue[int64]("pi.tool.budget", storage.Sticky)
)

// toolBudgetDefaultMs is how long a tool call may block its turn when the
// conversation sets no pi.tool.budget (§8.3).
const toolBudgetDefaultMs = 180_000

// GenerationConfig is the config a generation captured when it was created,
// so that a retry uses what the first attempt used.
type GenerationConfig struct {
	Model    ModelRef `json:"model"`
	Thinking string   `json:"thinking,omitempty"`
	// SelectedTools is nil (null) when the conversation never selected
	// tools, which offers every registered tool; an empty selection offers
	// none, so the two must not collapse into one form.
	SelectedTools []string `json:"selectedTools"`
	Profile       string   `json:"profile,omitempty"`
	BudgetMs      int64    `json:"budgetMs"`
}

// readConfig reads a conversation's generation config as the commit leaves
// it so far: what it wrote (a spawn's inherited values), else committed state.
func readConfig(tx *core.Tx, conv storage.ID) (GenerationConfig, error) {
	var c GenerationConfig
	var err error
	read := func(addr storage.Address, into any) {
		if err != nil {
			return
		}
		addr.Scope.ID = conv
		v, ok, e := tx.ValueAsWritten(addr)
		if plant.On("config-reads-committed-only") {
			var committed storage.Version
			committed, ok, e = tx.GetValue(addr, 0)
			v = committed.Value
		}
		if e != nil {
			err = e
			return
		}
		if ok {
			if e := json.Unmarshal(v, into); e != nil {
				err = fmt.Errorf("agent: config %s: %w", addr, e)
			}
		}
	}
	read(ModelValue.Address, &c.Model)
	read(ThinkingValue.Address, &c.Thinking)
	read(SelectedToolsValue.Address, &c.SelectedTools)
	read(ProfileValue.Address, &c.Profile)
	read(ToolBudgetValue.Address, &c.BudgetMs)
	if c.BudgetMs <= 0 {
		c.BudgetMs = toolBudgetDefaultMs
	}
	return c, err
}

// ModelSource is a provider and the models it serves.
type ModelSource struct {
	Provider ai.Provider
	Models   []ai.Model
}

// Models resolves model references to a provider.
type Models struct {
	sources []ModelSource
}

// NewModels returns a registry over sources; the first model of the first
// source is the default.
func NewModels(sources ...ModelSource) *Models {
	return &Models{sources: slices.Clone(sources)}
}

// UnknownModelError reports a model reference nobody serves.
type UnknownModelError struct{ Ref ModelRef }

func (e *UnknownModelError) Error() string {
	return fmt.Sprintf("agent: no provider serves model %q of provider %q", e.Ref.ModelID, e.Ref.Provider)
}

// Resolve finds the provider and model for ref.
func (m *Models) Resolve(ref ModelRef) (ai.Model, ai.Provider, error) {
	if m != nil {
		for _, s := range m.sources {
			for _, model := range s.Models {
				if ref == (ModelRef{}) || (model.ID == ref.ModelID && (ref.Provider == "" || model.Provider == ref.Provider)) || plant.On("model-resolves-to-default") {
					return model, s.Provider, nil
				}
			}
		}
	}
	return ai.Model{}, nil, &UnknownModelError{Ref: ref}
}

// RetryPolicy bounds a generation's retries of retryable provider errors.
type RetryPolicy struct {
	// Attempts is the most attempts one generation makes, the first
	// included; 0 means retryAttemptsDefault.
	Attempts int
	// Delay is the wait before the first retry; each later one doubles it.
	// 0 means retryDelayDefault.
	Delay time.Duration
}

const (
	retryAttemptsDefault = 3
	retryDelayDefault    = time.Second
	retryDelayMax        = time.Minute
)

func (p RetryPolicy) attempts() int {
	if p.Attempts <= 0 {
		return retryAttemptsDefault
	}
	return p.Attempts
}

// delay is the wait before retry number n (1-based).
func (p RetryPolicy) delay(n int) time.Duration {
	d := p.Delay
	if d <= 0 {
		d = retryDelayDefault
	}
	for i := 1; i < n && d < retryDelayMax; i++ {
		d *= 2
	}
	return min(d, retryDelayMax)
}

// UsageRow is one attempt's usage (§8.2): failed, deferred and aborted
// attempts included. A nil Usage is unknown cost, never zero.
type UsageRow struct {
	ConversationID storage.ID `json:"conversationId"`
	TaskID         storage.ID `json:"taskId"`
	Kind           string     `json:"kind"`
	Model          string     `json:"model,omitempty"`
	Attempt        int        `json:"attempt"`
	Outcome        string     `json:"outcome"`
	Usage          *ai.Usage  `json:"usage,omitempty"`
}

// The session's usage record: one list element per attempt, and the totals
// kept current in the same commit so that stats are a point read.
var (
	UsageList   = storage.SessionList[UsageRow]("pi.usage")
	UsageTotals = storage.SessionValue[ai.Usage]("pi.usage.totals")
)

// recordUsage appends rows to pi.usage and adds the known ones to the
// totals. Call it once per commit: the totals are read from committed state.
func recordUsage(tx *core.Tx, rows ...UsageRow) error {
	if len(rows) == 0 {
		return nil
	}
	totals, _, err := core.TxValue(tx, UsageTotals).Get(0)
	if err != nil {
		return err
	}
	known := false
	for _, r := range rows {
		core.TxList(tx, UsageList).Append(r)
		if r.Usage != nil && !(plant.On("usage-totals-skip-failed") && r.Outcome != "done") {
			totals, known = totals.Add(*r.Usage), true
			if plant.On("usage-totals-cost-not-summed") {
				totals.Cost = r.Usage.Cost
			}
		}
	}
	if known {
		core.TxValue(tx, UsageTotals).Set(totals)
	}
	return nil
}

// UsageOf decodes a usage event of a session watch: the attempt's row and
// the totals as its batch left them (zero before any known usage).
func UsageOf(e core.SessionEvent) (UsageRow, ai.Usage, error) {
	var row UsageRow
	var totals ai.Usage
	if e.Type != core.SessionEventUsage {
		return row, totals, fmt.Errorf("agent: a %s session event is not a usage event", e.Type)
	}
	if err := json.Unmarshal(e.Row, &row); err != nil {
		return row, totals, fmt.Errorf("agent: usage row: %w", err)
	}
	if len(e.Totals) > 0 {
		if err := json.Unmarshal(e.Totals, &totals); err != nil {
			return row, totals, fmt.Errorf("agent: usage totals: %w", err)
		}
	}
	return row, totals, nil
}
