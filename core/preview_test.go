package core_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
)

// counting is a kind with a preview, {"n": frames so far}: its execute
// writes frames to scratch, each with its preview change, waiting at gate
// (when set) after the first unwatched ones.
type counting struct {
	core.KindFuncs
}

func (counting) InitPreview(ctx context.Context, task *storage.Task, sc core.ScratchReader) (any, error) {
	return map[string]any{"n": json.Number("0")}, nil
}

func newCounting(before, after int, gate, waiting core.Event) counting {
	k := counting{core.KindFuncs{Statuses: core.Statuses{Name: "counting", Initial: "planned", Roles: simtest.TaskRoles}}}
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
			if err := tr.Set(delta.Path{"n"}, json.Number(strconv.Itoa(i))); err != nil {
				return err
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

// A preview whose task nobody watches is published without its ops being
// computed: a watch that attaches later captures the published value, its
// first output is the whole value, and its fold stays the capture.
func TestAnUnwatchedPreviewIsPublishedAndALaterWatchFoldsToIt(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		gate, waiting := s.Runtime().NewEvent("gate"), s.Runtime().NewEvent("waiting")
		k := newCounting(3, 2, gate, waiting)
		h := open(t, ctx, s, nil, k)
		c := h.Root()
		var id storage.ID
		must(c.Commit(ctx, func(tx *core.ConversationTx) error { id = tx.Task(k, core.TaskSpec{}); return nil }))
		simtest.DriveInActor(ctx, s, c, nil)
		must(0, waiting.Wait(ctx))

		r := simtest.StartWatch(t, ctx, h, c.ID, nil)
		if got := r.W.View().Previews[id]; !cmp.Equal(got, map[string]any{"n": json.Number("3")}) {
			t.Fatalf("a late watch captured preview %v; want the published {n: 3}", got)
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
}
