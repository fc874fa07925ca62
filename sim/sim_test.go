package sim_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
	"pgregory.net/rapid"
)

// TestMain runs rapid properties over at least 500 cases unless asked otherwise.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" {
		f.Value.Set("500")
	}
	os.Exit(m.Run())
}

// program is a small concurrent system: eight actors that sleep, wait on
// each other's events, cancel contexts and commit through one line.
func program(s *sim.Sim) func(ctx context.Context) {
	return func(ctx context.Context) {
		rt := s.Runtime()
		store := memory.New()
		line := core.NewLine(rt, store, core.NewKinds(), core.LineOptions{
			AfterCommit: func(_ context.Context, _ storage.CommitBatch, r storage.Range) func() {
				s.Record("commit", r)
				return nil
			},
		})
		var conv storage.ID
		if _, err := line.Commit(ctx, func(tx *core.Tx) error {
			conv = tx.CreateConversation(core.ConversationSpec{})
			return nil
		}); err != nil {
			panic(err)
		}
		const actors = 8
		ready := make([]core.Event, actors)
		for i := range ready {
			ready[i] = rt.NewEvent(fmt.Sprintf("ready%d", i))
		}
		waitCtx, cancelWaits := context.WithCancel(ctx)
		defer cancelWaits()
		finished := rt.NewEvent("finished")
		left := actors
		for i := range actors {
			rt.Go(ctx, fmt.Sprintf("a%d", i), func(ctx context.Context) {
				defer func() {
					if left--; left == 0 {
						finished.Set()
					}
				}()
				if err := rt.Sleep(ctx, time.Duration(s.Rand().IntN(5))*time.Millisecond); err != nil {
					panic(err)
				}
				if _, err := line.Commit(ctx, func(tx *core.Tx) error {
					core.AppendUser(tx, conv, ai.UserText(fmt.Sprintf("from a%d", i), 0))
					return nil
				}); err != nil {
					panic(err)
				}
				ready[i].Set()
				switch {
				case i == actors-1:
					cancelWaits() // wakes every actor still waiting below
				case i%2 == 0:
					err := ready[i+1].Wait(waitCtx)
					s.Record("waited", map[string]any{"actor": i, "cancelled": err != nil})
				default:
					rt.Sleep(ctx, time.Millisecond)
				}
			})
		}
		if err := finished.Wait(ctx); err != nil {
			panic(err)
		}
	}
}

func run(t testing.TB, seed uint64, strategy sim.Strategy) *sim.Trace {
	trace := sim.NewTrace(nil, true)
	s := sim.New(sim.Options{Seed: seed, Strategy: strategy, Trace: trace})
	if err := s.Run(context.Background(), program(s)); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return trace
}

func TestSameSeedGivesByteIdenticalTraces(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		strategy := rapid.SampledFrom([]string{"random", "pct"}).Draw(rt, "strategy")
		mk := func() sim.Strategy { st, _ := sim.ParseStrategy(strategy); return st }
		a, b := run(t, seed, mk()), run(t, seed, mk())
		if a.Digest() != b.Digest() || strings.Join(a.Lines(), "\n") != strings.Join(b.Lines(), "\n") {
			rt.Fatalf("seed %d (%s): traces differ:\n%s\n---\n%s", seed, strategy, strings.Join(a.Lines(), "\n"), strings.Join(b.Lines(), "\n"))
		}
	})
}

func TestDifferentSeedsExploreDifferentInterleavings(t *testing.T) {
	const pairs = 200
	differ := 0
	for i := range uint64(pairs) {
		if run(t, 2*i+1, nil).Digest() != run(t, 2*i+2, nil).Digest() {
			differ++
		}
	}
	if differ*100 < pairs*90 {
		t.Fatalf("%d of %d seed pairs gave different interleavings; want at least 90%%", differ, pairs)
	}
}

// lostUpdate is a planted race: two actors read a shared counter, reach a
// scheduling point, and write back what they read plus one.
func lostUpdate(s *sim.Sim, counter *int) func(ctx context.Context) {
	return func(ctx context.Context) {
		rt := s.Runtime()
		done := rt.NewEvent("done")
		left := 2
		for _, name := range []string{"A", "B"} {
			rt.Go(ctx, name, func(ctx context.Context) {
				sim.Yield(ctx, "check")
				read := *counter
				sim.Yield(ctx, "act")
				*counter = read + 1
				if left--; left == 0 {
					done.Set()
				}
			})
		}
		done.Wait(ctx)
	}
}

func findLostUpdate(t *testing.T, strategy func() sim.Strategy) uint64 {
	t.Helper()
	for seed := range uint64(200) {
		counter := 0
		s := sim.New(sim.Options{Seed: seed, Strategy: strategy()})
		if err := s.Run(context.Background(), lostUpdate(s, &counter)); err != nil {
			t.Fatal(err)
		}
		if counter == 1 {
			return seed
		}
	}
	t.Fatal("the lost update was not found within 200 seeds")
	return 0
}

func TestPlantedLostUpdateIsFoundAndReplays(t *testing.T) {
	for name, mk := range map[string]func() sim.Strategy{
		"random": sim.Random,
		"pct":    func() sim.Strategy { return sim.PCT(2, 12) },
	} {
		t.Run(name, func(t *testing.T) {
			seed := findLostUpdate(t, mk)
			for range 3 {
				counter := 0
				s := sim.New(sim.Options{Seed: seed, Strategy: mk()})
				if err := s.Run(context.Background(), lostUpdate(s, &counter)); err != nil || counter != 1 {
					t.Fatalf("replay of seed %d: counter %d, err %v; want the lost update again", seed, counter, err)
				}
			}
		})
	}
}

func TestForcedOrderObservesBothOutcomes(t *testing.T) {
	// Two actors race to set a shared value; the last writer wins.
	outcome := func(order ...string) string {
		var last string
		f := sim.Forced(order, nil)
		s := sim.New(sim.Options{Seed: 7, Strategy: f})
		err := s.Run(context.Background(), func(ctx context.Context) {
			rt := s.Runtime()
			done := rt.NewEvent("done")
			left := 2
			for _, name := range []string{"A", "B"} {
				rt.Go(ctx, name, func(ctx context.Context) {
					sim.Yield(ctx, "write")
					last = name
					if left--; left == 0 {
						done.Set()
					}
				})
			}
			done.Wait(ctx)
		})
		if err != nil || !f.Done() || len(f.Violations()) > 0 {
			t.Fatalf("order %v: err %v, done %v, violations %v", order, err, f.Done(), f.Violations())
		}
		return last
	}
	for range 3 {
		if got := outcome("A:write", "B:write"); got != "B" {
			t.Fatalf("A before B: last writer %s; want B", got)
		}
		if got := outcome("B:write", "A:write"); got != "A" {
			t.Fatalf("B before A: last writer %s; want A", got)
		}
	}
}

func TestDeadlockNamesEveryBlockedActor(t *testing.T) {
	s := sim.New(sim.Options{Seed: 1})
	err := s.Run(context.Background(), func(ctx context.Context) {
		rt := s.Runtime()
		aDone, bDone := rt.NewEvent("a-done"), rt.NewEvent("b-done")
		rt.Go(ctx, "alice", func(ctx context.Context) { bDone.Wait(ctx); aDone.Set() })
		rt.Go(ctx, "bob", func(ctx context.Context) { aDone.Wait(ctx); bDone.Set() })
		aDone.Wait(ctx)
	})
	var d *sim.DeadlockError
	if !errors.As(err, &d) {
		t.Fatalf("err = %v; want a *sim.DeadlockError", err)
	}
	msg := d.Error()
	for _, want := range []string{"alice at wait:b-done", "bob at wait:a-done", "main at wait:a-done"} {
		if !strings.Contains(msg, want) {
			t.Errorf("deadlock report %q does not mention %q", msg, want)
		}
	}
}

func TestLongVirtualSleepTakesNoWallTime(t *testing.T) {
	s := sim.New(sim.Options{Seed: 1})
	var woke time.Time
	start := s.Now()
	err := s.Run(context.Background(), func(ctx context.Context) {
		if err := s.Runtime().Sleep(ctx, 10*time.Hour); err != nil {
			panic(err)
		}
		woke = s.Runtime().Now()
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := woke.Sub(start); got != 10*time.Hour {
		t.Fatalf("virtual time slept = %v; want 10h", got)
	}
}

func TestCancellationWakesASleeper(t *testing.T) {
	s := sim.New(sim.Options{Seed: 3})
	var sleepErr error
	var slept time.Duration
	err := s.Run(context.Background(), func(ctx context.Context) {
		rt := s.Runtime()
		sleepCtx, cancel := context.WithCancel(ctx)
		done := rt.NewEvent("done")
		rt.Go(ctx, "sleeper", func(ctx context.Context) {
			start := rt.Now()
			sleepErr = rt.Sleep(sleepCtx, time.Hour)
			slept = rt.Now().Sub(start)
			done.Set()
		})
		rt.Sleep(ctx, time.Minute)
		cancel()
		done.Wait(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(sleepErr, context.Canceled) || slept != time.Minute {
		t.Fatalf("sleep = %v after %v; want context.Canceled after 1m (when the canceller ran)", sleepErr, slept)
	}
}

func TestBlockingOutsideAnActorPanicsNamingTheRule(t *testing.T) {
	s := sim.New(sim.Options{Seed: 1})
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "outside an actor") {
			t.Fatalf("panic = %v; want one naming the outside-an-actor rule", r)
		}
	}()
	s.Runtime().Sleep(context.Background(), time.Second)
}

func TestActorPanicIsReportedWithItsName(t *testing.T) {
	s := sim.New(sim.Options{Seed: 1})
	err := s.Run(context.Background(), func(ctx context.Context) {
		s.Runtime().Go(ctx, "broken", func(ctx context.Context) { panic("kaboom") })
		s.Runtime().Sleep(ctx, time.Second)
	})
	var p *sim.PanicError
	if !errors.As(err, &p) || p.Actor != "broken" || fmt.Sprint(p.Value) != "kaboom" {
		t.Fatalf("err = %v; want a PanicError from actor broken", err)
	}
}

// A run whose actor panics records the same failure every time: the
// stack in the trace is stripped of goroutine numbers and addresses.
func TestAPanickingRunRecordsTheSameTraceEveryTime(t *testing.T) {
	digest := func() string {
		tr := sim.NewTrace(nil, false)
		s := sim.New(sim.Options{Seed: 3, Trace: tr})
		_ = s.Run(context.Background(), func(ctx context.Context) {
			done := s.Runtime().NewEvent("done")
			s.Runtime().Go(ctx, "boom", func(context.Context) {
				p := new(int)
				panic(fmt.Sprintf("boom at %p", p)[:4])
			})
			_ = done.Wait(ctx)
		})
		return tr.Digest()
	}
	if a, b := digest(), digest(); a != b {
		t.Fatalf("two runs of a panicking seed traced %s and %s", a, b)
	}
}

// A run that ends with actors still blocked unwinds them one by one before
// Run returns: their deferred code runs, an actor that never got a turn
// never runs at all, and no actor's goroutine outlives the run.
func TestAnEndedRunUnwindsEveryActor(t *testing.T) {
	before := runtime.NumGoroutine()
	s := sim.New(sim.Options{Seed: 1})
	var unwound []string
	started := false
	err := s.Run(context.Background(), func(ctx context.Context) {
		rt := s.Runtime()
		never := rt.NewEvent("never")
		for _, name := range []string{"alice", "bob"} {
			rt.Go(ctx, name, func(ctx context.Context) {
				defer func() { unwound = append(unwound, name) }()
				never.Wait(ctx)
			})
		}
		rt.Sleep(ctx, time.Second) // alice and bob park before main goes on
		rt.Go(ctx, "late", func(context.Context) { started = true })
		defer func() { unwound = append(unwound, "main") }()
		panic("main gives up")
	})
	var p *sim.PanicError
	if !errors.As(err, &p) || p.Actor != "main" {
		t.Fatalf("err = %v; want main's PanicError", err)
	}
	if want := []string{"main", "alice", "bob"}; !slices.Equal(unwound, want) {
		t.Errorf("deferred code ran for %v; want %v (main's at its panic, then the blocked actors in spawn order)", unwound, want)
	}
	if started {
		t.Error("an actor spawned after the last scheduling decision ran")
	}
	if after := runtime.NumGoroutine(); after != before {
		t.Errorf("%d goroutines after the run, %d before: an actor outlived it", after, before)
	}
}
