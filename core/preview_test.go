package core_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
)

// counting is a kind with a preview, {"n": frames so far}, which its
// InitPreview builds from the frames in scratch: its execute writes frames,
// each with its preview change, and waits at gate after the first ones.
// A counting kind that skips leaves the tracker alone while
// PreviewWatched says nobody watches.
type counting struct {
	core.KindFuncs
	initial func(frames int) int // what InitPreview says of so many frames
}

func (k counting) InitPreview(ctx context.Context, task *storage.Task, sc core.ScratchReader) (any, error) {
	page, err := sc.ReadList(frames.Address, storage.ListQuery{Cursor: storage.Cursor{Limit: 100}})
	if err != nil {
		return nil, err
	}
	return map[string]any{"n": json.Number(strconv.Itoa(k.initial(len(page.Items))))}, nil
}

func newCounting(before, after int, gate, waiting core.Event, skip bool) counting {
	k := counting{KindFuncs: core.KindFuncs{Statuses: core.Statuses{Name: "counting", Initial: "planned", Roles: simtest.TaskRoles}},
		initial: func(n int) int { return n }}
	k.ExecuteFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
		if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
			tx.Patch(task.ID, core.TaskPatch{Status: "running"})
			return nil
		}); err != nil {
			return err
		}
		tr, err := rt.Preview(ctx)
		if err != nil {
			return err
		}
		for i := 1; i <= before+after; i++ {
			if i == before+1 {
				waiting.Set()
				if err := gate.Wait(ctx); err != nil {
					return err
				}
			}
			if !skip || rt.PreviewWatched() {
				if err := tr.Set(delta.Path{"n"}, json.Number(strconv.Itoa(i))); err != nil {
					return err
				}
			}
			if err := appendFrames(ctx, rt, "f"); err != nil {
				return err
			}
		}
		_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "done", nil); return nil })
		return err
	}
	return k
}

// A preview nobody watches is published without its ops being computed,
// and one its invocation left alone meanwhile (PreviewWatched) is rebuilt
// from durable scratch: either way a watch that attaches later captures
// the preview so far, its first output is the whole value, the next ones
// are changes, and its fold stays the capture. A host's read of the
// preview agrees.
func TestAnUnwatchedPreviewIsPublishedAndALaterWatchFoldsToIt(t *testing.T) {
	for _, skip := range []bool{false, true} {
		t.Run(map[bool]string{false: "kept in step", true: "left alone"}[skip], func(t *testing.T) {
			simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
				gate, waiting := s.Runtime().NewEvent("gate"), s.Runtime().NewEvent("waiting")
				k := newCounting(3, 2, gate, waiting, skip)
				h := open(t, ctx, s, nil, k)
				c := h.Root()
				var id storage.ID
				must(c.Commit(ctx, func(tx *core.ConversationTx) error { id = tx.Task(k, core.TaskSpec{}); return nil }))
				simtest.DriveInActor(ctx, s, c, nil)
				must(0, waiting.Wait(ctx))

				three := map[string]any{"n": json.Number("3")}
				if v, ok, err := h.Preview(ctx, id); err != nil || !ok || !cmp.Equal(v, any(three)) {
					t.Fatalf("the host reads preview %v (%v, %v); want {n: 3}", v, ok, err)
				}
				r := simtest.StartWatch(t, ctx, h, c.ID, nil)
				if got := r.W.View().Previews[id]; !cmp.Equal(got, any(three)) {
					t.Fatalf("a late watch captured preview %v; want {n: 3}", got)
				}
				gate.Set()
				must(c.Drive(ctx))
				simtest.CaughtUp(ctx, s, r, h.Store().LastSeq())

				var outputs [][]delta.Op
				for _, e := range r.Events {
					if e.Type == core.EventTaskOutput && e.TaskID == id {
						outputs = append(outputs, e.Ops)
					}
				}
				want := [][]delta.Op{
					{delta.Replace(map[string]any{"n": json.Number("4")})}, // none was computed before: the whole value
					{delta.Set(delta.Path{"n"}, json.Number("5"))},
				}
				if diff := cmp.Diff(want, outputs); diff != "" {
					t.Fatalf("the late watch's outputs (-want +got):\n%s", diff)
				}
				fresh := must(h.Watch(ctx, c.ID, core.WatchOptions{Tail: 1000}))
				simtest.ViewsEqual(t, "the late watch's fold", fresh.View(), r.W.View())
				must(0, h.Close(ctx))
			})
		})
	}
}

// With CheckPreviews, a preview its invocation keeps that differs from
// what the task's durable scratch builds breaks the "preview" invariant:
// a preview left alone while nobody watches is rebuilt from that.
func TestAPreviewThatDisagreesWithItsScratchBreaksAnInvariant(t *testing.T) {
	s := sim.New(sim.Options{Seed: 1})
	err := s.Run(context.Background(), func(ctx context.Context) {
		gate, waiting := s.Runtime().NewEvent("gate"), s.Runtime().NewEvent("waiting")
		gate.Set()
		k := newCounting(0, 2, gate, waiting, false)
		k.initial = func(int) int { return 0 } // forgets its frames
		h := open(t, ctx, s, nil, k)
		c := h.Root()
		must(c.Commit(ctx, func(tx *core.ConversationTx) error { tx.Task(k, core.TaskSpec{}); return nil }))
		_, _ = c.Drive(ctx)
	})
	if err == nil || !strings.Contains(err.Error(), `driver invariant "preview" broken`) {
		t.Fatalf("run = %v; want the simulator stopped by the preview invariant", err)
	}
}

// A capture shows the preview the flushes published, never a change its
// producer holds mid-window, a Replace included: a watch that attaches
// while the producer has replaced its value, without a scratch commit
// since, starts from what the others hold (and what durable scratch
// builds, which CheckPreviews holds every capture to), and the next flush
// brings the replacement to both.
func TestACaptureNeverShowsAnUnflushedReplace(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		gate, waiting := s.Runtime().NewEvent("gate"), s.Runtime().NewEvent("waiting")
		k := newCounting(0, 0, gate, waiting, false)
		k.ExecuteFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			tr, err := rt.Preview(ctx)
			if err != nil {
				return err
			}
			if err := tr.Set(delta.Path{"n"}, json.Number("1")); err != nil {
				return err
			}
			if err := appendFrames(ctx, rt, "f"); err != nil {
				return err
			}
			if err := tr.Replace(map[string]any{"n": json.Number("2")}); err != nil {
				return err
			}
			waiting.Set()
			if err := gate.Wait(ctx); err != nil {
				return err
			}
			if err := appendFrames(ctx, rt, "f"); err != nil {
				return err
			}
			_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "done", nil); return nil })
			return err
		}
		h := open(t, ctx, s, nil, k)
		c := h.Root()
		early := simtest.StartWatch(t, ctx, h, c.ID, nil) // someone watches: the flushes compute ops
		var id storage.ID
		must(c.Commit(ctx, func(tx *core.ConversationTx) error { id = tx.Task(k, core.TaskSpec{}); return nil }))
		simtest.DriveInActor(ctx, s, c, nil)
		must(0, waiting.Wait(ctx))

		one := map[string]any{"n": json.Number("1")}
		late := simtest.StartWatch(t, ctx, h, c.ID, nil)
		if got := late.W.View().Previews[id]; !cmp.Equal(got, any(one)) {
			t.Fatalf("a watch captured preview %v mid-window; want the flushed {n: 1}", got)
		}
		if v, _, err := h.Preview(ctx, id); err != nil || !cmp.Equal(v, any(one)) {
			t.Fatalf("the host reads preview %v (%v) mid-window; want the flushed {n: 1}", v, err)
		}
		gate.Set()
		must(c.Drive(ctx))
		simtest.CaughtUp(ctx, s, early, h.Store().LastSeq())
		simtest.CaughtUp(ctx, s, late, h.Store().LastSeq())
		for _, r := range []*simtest.Watched{early, late} {
			var last []delta.Op
			for _, e := range r.Events {
				if e.Type == core.EventTaskOutput && e.TaskID == id {
					last = e.Ops
				}
			}
			if want := []delta.Op{delta.Replace(map[string]any{"n": json.Number("2")})}; !cmp.Equal(last, want) {
				t.Errorf("a watch's last output %v; want the replacement %v", last, want)
			}
		}
		must(0, h.Close(ctx))
	})
}
