package conformance_test

import (
	"context"
	"errors"
	"fmt"

	"testing"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/faux"
)

// The overflow chain cut at every commit (§8.2, §8.4): two turns, then one
// whose request overflows; its generation hands the turn to a collapse,
// which summarizes (the candidate in scratch), publishes the summary and
// creates the retry, which answers. A crash anywhere in it loses no entry,
// leaves no collapse live, and ends every input once.
var overflowChainCrashes = crashScenario{
	test:  "TestCrashPointsOfTheOverflowChain",
	first: crashOverflowChain,
	transcript: []string{"user:one", "system:", "assistant:re: one", "user:two", "assistant:re: two", "user:three",
		"summary:Summary of the earlier conversation:\n\nthe summary", "system:", "assistant:re: three"},
	results: []agent.InputStatus{agent.InputDone, agent.InputDone, agent.InputDone},
}

func TestCrashPointsOfTheOverflowChain(t *testing.T) { exploreCrashPoints(t, overflowChainCrashes) }

func crashOverflowChain(ctx context.Context, s *sim.Sim, store *fault.Storage, r *crashRecord) {
	r.first.Storage = store
	a, err := openCrashAgent(ctx, s, &r.first, nil)
	if errors.Is(err, fault.ErrCrashed) {
		return
	}
	crashMust(0, err)
	a.faux.SetResponses(faux.Reply(faux.Text("re: one")), faux.Reply(faux.Text("re: two")), faux.ContextOverflow(),
		faux.Reply(faux.Text("the summary")), faux.Reply(faux.Text("re: three")))
	c := a.h.Root()
	crashed := func(what string, err error) bool {
		if err != nil && !errors.Is(err, fault.ErrCrashed) {
			r.problems = append(r.problems, fmt.Sprintf("the first process's %s failed without a crash: %v", what, err))
		}
		return err != nil
	}
	settings, err := c.Config(agent.CollapseKind)
	crashMust(0, err)
	if crashed("keepRecent", settings.Set(ctx, map[string]any{"keepRecent": 0})) {
		return
	}
	for _, text := range []string{"one", "two", "three"} {
		id, err := c.Accept(ctx, ai.PlainText(text), agent.AcceptOptions{})
		if crashed("accept "+text, err) {
			break
		}
		r.inputs = append(r.inputs, id)
		if _, err := c.Drive(ctx); crashed("drive", err) {
			break
		}
	}
	r.end(ctx, a, c)
}
