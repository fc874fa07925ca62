package kit

import (
	"context"
	"fmt"

	"github.com/pico-go/pico/sim"
)

// Run runs a scenario against this implementation, in process, on the
// simulated runtime with seed, and returns its normalized outcome.
func Run(ctx context.Context, sc *Scenario, seed uint64) (Outcome, error) {
	return RunRecorded(ctx, sc, seed, nil)
}

// RunRecorded is Run that hands record every record and event the
// scenario exchanges, under the name of its schema (fixtures/schema/v1):
// every event of every conversation watch, and at the end every
// conversation, entry, task, input result, inbox item, usage row and final
// view.
func RunRecorded(ctx context.Context, sc *Scenario, seed uint64, record func(schema string, v any)) (Outcome, error) {
	open, actions, err := sc.Requests()
	if err != nil {
		return Outcome{}, err
	}
	s := sim.New(sim.Options{Seed: seed})
	var out Outcome
	var runErr error
	err = s.Run(ctx, func(ctx context.Context) {
		se, err := newSession(s, open)
		if err == nil {
			se.record = record
			err = se.open(ctx)
		}
		for i := 0; err == nil && i < len(actions); i++ {
			_, err = se.do(ctx, actions[i].Op, actions[i].Args, actions[i].Line)
		}
		if err == nil {
			out, err = se.outcome(ctx)
		}
		if se != nil && se.h != nil {
			if cerr := se.h.Close(ctx); err == nil {
				err = cerr
			}
		}
		runErr = err
	})
	if err == nil {
		err = runErr
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	return Normalize(out), nil
}
