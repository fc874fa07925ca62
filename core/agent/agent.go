package agent

import (
	"context"
	"errors"
	"slices"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
	"go.opentelemetry.io/otel/trace"
)

// Options configures Open: the session options of core.Open, and what the
// agent loop runs with.
type Options struct {
	// Runtime is where actors run and time passes; nil means
	// core.RealRuntime.
	Runtime core.Runtime
	// EntryKinds and TaskKinds are added to the built-ins; a task kind
	// under a built-in's name is an error: swap one through Replace, which
	// takes kinds that understand the persisted statuses and state of the
	// one they replace (wrap the original: GenerationKind, ToolKind,
	// PostToolsKind).
	EntryKinds []storage.Kinder
	TaskKinds  []core.TaskKind
	Replace    []core.TaskKind
	// TracerProvider, OnTaskOutput, OnInvocation, WatchQueueMax, Report,
	// CheckInvariants, CheckPreviews and CheckContexts are core.Options's.
	TracerProvider  trace.TracerProvider
	OnTaskOutput    func(core.TaskOutput)
	OnInvocation    func(inv core.Invocation, returned bool)
	WatchQueueMax   int
	Report          func(error)
	CheckInvariants bool
	CheckPreviews   bool
	CheckContexts   bool

	// Models serves the models generations call; Tools is the catalogue
	// of tools they may offer. Retry bounds retries of retryable provider
	// errors. Env is the execution environment tools act in.
	Models *Models
	Tools  []Tool
	Retry  RetryPolicy
	Env    ExecutionEnv
	// Budget limits the session's turns, queries, output tokens, spend,
	// tool calls and wall-clock time (budget.go); zero limits nothing.
	Budget BudgetLimits
}

// config is what the built-in kinds run with in one session. It is the
// session's extension under configKey, found through TaskRuntime.Harness,
// so that the kinds themselves are plain values a host can wrap.
type config struct {
	models *Models
	tools  *toolRegistry
	retry  RetryPolicy
	env    ExecutionEnv
	budget BudgetLimits
}

type configKey struct{}

// ErrNotAgentHarness is what a built-in kind returns, faulting the session,
// when it runs in a harness that agent.Open did not open.
var ErrNotAgentHarness = errors.New("agent: the harness was not opened by agent.Open")

// configOf returns the agent configuration of the harness a task runs in.
func configOf(h *core.Harness) (*config, error) {
	c, ok := h.Extension(configKey{}).(*config)
	if !ok {
		return nil, ErrNotAgentHarness
	}
	return c, nil
}

// Harness is a session opened by Open: the kernel's harness with pico's
// built-in kinds registered, whose conversations carry the agent verbs.
type Harness struct {
	*core.Harness
	cfg *config
}

// Open opens a session over store with pico's built-in kinds (generation,
// tool, post_tools, collapse, job) and the inbox's rules and views registered, then does
// what core.Open does.
func Open(ctx context.Context, store storage.Storage, opts Options) (*Harness, error) {
	builtin := opts.Tools
	if !slices.ContainsFunc(opts.Tools, func(t Tool) bool { return t.Definition.Name == SubagentToolName }) {
		builtin = append(slices.Clone(opts.Tools), SubagentTool())
	}
	tools, err := newToolRegistry(builtin)
	if err != nil {
		return nil, err
	}
	cfg := &config{models: opts.Models, tools: tools, retry: opts.Retry, env: opts.Env, budget: opts.Budget}
	kinds := append([]core.TaskKind{GenerationKind, ToolKind, PostToolsKind, CollapseKind, JobKind}, opts.TaskKinds...)
	h, err := core.Open(ctx, store, core.Options{
		Runtime: opts.Runtime, EntryKinds: opts.EntryKinds, TaskKinds: kinds, Replace: opts.Replace,
		Rules:   Rules(),
		Watched: core.Watched{Inbox: InboxList.Address, UsageRows: UsageList.Address, UsageTotals: UsageTotals.Address},
		// A conversation abort also cancels queued steer and followUp
		// input of every conversation it touches (§6.3).
		ConversationAbort: func(tx *core.Tx, convs []storage.ID) error {
			for i, conv := range convs {
				if i > 0 && plant.On("abort-cancels-own-queue-only") {
					break
				}
				if err := cancelQueuedTurns(tx, conv); err != nil {
					return err
				}
			}
			return nil
		},
		Extensions:     map[any]any{configKey{}: cfg},
		TracerProvider: opts.TracerProvider, OnTaskOutput: opts.OnTaskOutput, OnInvocation: opts.OnInvocation, WatchQueueMax: opts.WatchQueueMax, Report: opts.Report,
		CheckInvariants: opts.CheckInvariants, CheckPreviews: opts.CheckPreviews, CheckContexts: opts.CheckContexts,
	})
	if err != nil {
		return nil, err
	}
	return &Harness{Harness: h, cfg: cfg}, nil
}

// Rules are the batch rules the agent loop adds to the kernel's: the
// input-result state machine of the inbox (RuleInputResult) and the range
// of the collapse settings (RuleCollapseSetting).
func Rules() []core.BatchRule { return []core.BatchRule{checkInputResults, checkCollapseSettings} }

// ValidateBatch is core.ValidateBatch with the agent's rules: what picosim
// check and a verifying JSONL replay hold an agent session's history to.
func ValidateBatch(ctx context.Context, store storage.Storage, batch storage.CommitBatch) error {
	return core.ValidateBatch(ctx, store, batch, Rules()...)
}

// Root returns the root conversation's handle.
func (h *Harness) Root() *Conversation { return h.wrap(h.Harness.Root()) }

// Conversation returns the handle of an existing conversation.
func (h *Harness) Conversation(ctx context.Context, id storage.ID) (*Conversation, error) {
	c, err := h.Harness.Conversation(ctx, id)
	if err != nil {
		return nil, err
	}
	return h.wrap(c), nil
}

// Tools returns the definitions of the named registered tools; nil names
// every tool.
func (h *Harness) Tools(names []string) []ai.Tool { return h.cfg.tools.definitions(names) }

func (h *Harness) wrap(c *core.Conversation) *Conversation {
	return &Conversation{Conversation: c, h: h}
}

// Conversation is a conversation handle with the agent verbs (§9.1):
// Accept, Prompt, Steer, FollowUp, NextRun, Write, CancelQueued, Result and
// Settings, on top of the kernel's.
type Conversation struct {
	*core.Conversation
	h *Harness
}

// Fork creates a conversation whose transcript is this one's through entry
// at (core.Conversation.Fork), as an agent handle.
func (c *Conversation) Fork(ctx context.Context, at storage.ID, opts core.ForkOptions) (*Conversation, error) {
	f, err := c.Conversation.Fork(ctx, at, opts)
	if err != nil {
		return nil, err
	}
	return c.h.wrap(f), nil
}

// Settings is the config of the kind registered as "generation" (§9.5):
// whatever implementation is registered under the name.
func (c *Conversation) Settings() (core.Config, error) {
	return c.Config(generationHooks)
}

// kindName is a kind known only by its name: whatever is registered under
// it is what a batch creates, and what hooks route by.
type kindName string

func (k kindName) Kind() string { return string(k) }
