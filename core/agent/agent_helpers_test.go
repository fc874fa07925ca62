package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
	"go.opentelemetry.io/otel/trace"
)

// loop is a harness with the faux provider and a set of tools, for the
// agent-loop tests.
type loop struct {
	t       testing.TB
	h       *agent.Harness
	faux    *faux.Provider
	reports []error
}

type agentOptions struct {
	store storage.Storage
	tools []agent.Tool
	kinds []core.TaskKind
	// replace swaps built-in kinds (agent.Options.Replace).
	replace []core.TaskKind
	retry   agent.RetryPolicy
	env     agent.ExecutionEnv
	faux    faux.Options
	tracer  trace.TracerProvider
	// wrap, when set, stands between the harness and the faux provider.
	wrap func(ai.Provider) ai.Provider
}

func openAgent(t testing.TB, ctx context.Context, s *sim.Sim, o agentOptions) *loop {
	t.Helper()
	a := &loop{t: t, faux: must(faux.New(s.Runtime(), s.Rand(), o.faux))}
	if o.store == nil {
		o.store = memory.New()
	}
	if o.tools == nil {
		o.tools = []agent.Tool{echoTool("a"), echoTool("b")}
	}
	var provider ai.Provider = a.faux
	if o.wrap != nil {
		provider = o.wrap(a.faux)
	}
	h, err := agent.Open(ctx, o.store, agent.Options{
		Runtime: s.Runtime(), TaskKinds: o.kinds, Replace: o.replace, Tools: o.tools, Retry: o.retry, Env: o.env, CheckInvariants: true, CheckPreviews: true,
		TracerProvider: o.tracer,
		Models:         agent.NewModels(agent.ModelSource{Provider: provider, Models: a.faux.Models()}),
		Report:         func(err error) { a.reports = append(a.reports, err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	a.h = h
	return a
}

var argsSchema = json.RawMessage(`{"type":"object","properties":{"v":{"type":"string"}},"required":["v"]}`)

// echoTool writes name(v); it is safe to replay.
func echoTool(name string) agent.Tool {
	return agent.Tool{
		Definition: ai.Tool{Name: name, Description: "echo " + name, Parameters: argsSchema},
		Replay:     agent.ReplaySafe,
		Execute: func(ctx context.Context, callID string, args json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			var p struct{ V string }
			if err := json.Unmarshal(args, &p); err != nil {
				return err
			}
			out.Write(fmt.Sprintf("%s(%s)", name, p.V))
			return nil
		},
	}
}

// toolFunc is a tool whose body the test supplies.
func toolFunc(name string, body func(ctx context.Context, args json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error) agent.Tool {
	return agent.Tool{
		Definition: ai.Tool{Name: name, Description: name, Parameters: json.RawMessage(`{"type":"object"}`)},
		Execute: func(ctx context.Context, _ string, args json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			return body(ctx, args, out, rt)
		},
	}
}

func calls(names ...string) faux.Step {
	blocks := make([]ai.Block, len(names))
	for i, n := range names {
		blocks[i] = faux.ToolCall(fmt.Sprintf("call-%s-%d", n, i), n, fmt.Sprintf(`{"v":%q}`, n))
	}
	return faux.Reply(blocks...).WithStop(ai.StopToolUse)
}

func answer(s string) faux.Step { return faux.Reply(faux.Text(s)) }

func userText(s string) ai.Content { return ai.PlainText(s) }

// transcript lists a conversation's entries as "kind:summary" strings.
func (a *loop) transcript(ctx context.Context, conv storage.ID) []string {
	a.t.Helper()
	p := must(a.h.Entries(ctx, conv, storage.Cursor{Limit: storage.PageLimitMax}))
	out := make([]string, len(p.Items))
	for i, e := range p.Items {
		out[i] = e.Kind + ":" + summarize(e)
	}
	return out
}

func summarize(e *storage.Entry) string {
	if len(e.Model) == 0 {
		return ""
	}
	m := e.Model[0]
	switch m.Role {
	case ai.RoleAssistant:
		var parts []string
		for _, b := range m.Content.Blocks {
			switch b.Type {
			case ai.BlockText:
				parts = append(parts, b.Text)
			case ai.BlockToolCall:
				parts = append(parts, "call "+b.Name)
			}
		}
		if m.StopReason == ai.StopError || m.StopReason == ai.StopAborted {
			parts = append(parts, string(m.StopReason))
		}
		return strings.Join(parts, ",")
	case ai.RoleSystem:
		return "system"
	}
	return m.Content.TextOf()
}

func (a *loop) result(ctx context.Context, conv *agent.Conversation, input storage.ID) agent.InputResult {
	a.t.Helper()
	r, ok, err := conv.Result(ctx, input)
	if err != nil || !ok {
		a.t.Fatalf("result of input %d: %v (found %v)", input, err, ok)
	}
	return r
}

func (a *loop) systemData(ctx context.Context, id storage.ID) core.SystemData {
	a.t.Helper()
	e, ok, err := a.h.GetEntry(ctx, id)
	if err != nil || !ok {
		a.t.Fatalf("entry %d: %v", id, err)
	}
	d, err := core.SystemKind.Data(e)
	if err != nil {
		a.t.Fatal(err)
	}
	return d
}

// entriesOf returns the ids of a conversation's entries of one kind.
func (a *loop) entriesOf(ctx context.Context, conv storage.ID, kind string) []storage.ID {
	a.t.Helper()
	p := must(a.h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationID: conv, Kind: kind}))
	ids := make([]storage.ID, len(p.Items))
	for i, e := range p.Items {
		ids[i] = e.ID
	}
	return ids
}
