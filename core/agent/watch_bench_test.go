package agent_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage/memory"
)

const watchListenersBench = 10

// BenchmarkWatchFanout commits entries with ten listeners watching and
// reports events delivered per second (all listeners together).
func BenchmarkWatchFanout(b *testing.B) {
	ctx := context.Background()
	h, err := agent.Open(ctx, memory.New(), agent.Options{})
	if err != nil {
		b.Fatal(err)
	}
	c := h.Root()
	var delivered atomic.Int64
	var watches []*core.WatchHandle
	progress := make(chan struct{}, 1)
	for range watchListenersBench {
		w, err := h.Watch(ctx, c.ID, core.WatchOptions{Tail: 100})
		if err != nil {
			b.Fatal(err)
		}
		w.Start(ctx, func(core.ConversationEvent) { delivered.Add(1); notify(progress) })
		watches = append(watches, w)
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if _, err := c.Commit(ctx, func(tx *core.ConversationTx) error {
			core.AppendUser(tx.Tx, c.ID, ai.UserText("m", int64(i)))
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	last := h.Store().LastSeq()
	for _, w := range watches {
		for w.View().ReadAt < last {
			<-progress
		}
	}
	b.ReportMetric(float64(delivered.Load())/time.Since(start).Seconds(), "events/s")
	if err := h.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStreamedTokenBytes streams an answer to a watcher and reports the
// JSON bytes of task_output events per streamed text token.
func BenchmarkStreamedTokenBytes(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		rt := core.RealRuntime()
		p := must(faux.New(rt, rand.New(rand.NewPCG(1, 2)), faux.Options{DiscardRequests: true}))
		p.SetResponses(faux.Reply(faux.Text(strings.Repeat("token ", 2000))))
		h, err := agent.Open(ctx, memory.New(), agent.Options{Runtime: rt,
			Models: agent.NewModels(agent.ModelSource{Provider: p, Models: p.Models()})})
		if err != nil {
			b.Fatal(err)
		}
		c := h.Root()
		w, err := h.Watch(ctx, c.ID, core.WatchOptions{})
		if err != nil {
			b.Fatal(err)
		}
		var bytes, outputs atomic.Int64
		progress := make(chan struct{}, 1)
		w.Start(ctx, func(e core.ConversationEvent) {
			defer notify(progress)
			if e.Type == core.EventTaskOutput {
				raw, _ := json.Marshal(e)
				bytes.Add(int64(len(raw)))
				outputs.Add(1)
			}
		})
		if _, err := c.Prompt(ctx, ai.PlainText("go"), agent.AcceptOptions{}); err != nil {
			b.Fatal(err)
		}
		for w.View().ReadAt < h.Store().LastSeq() {
			<-progress
		}
		b.ReportMetric(float64(bytes.Load())/float64(outputs.Load()), "bytes/token")
		if err := h.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// notify wakes a waiter without blocking the listener.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
