package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/storage"
)

// The shape rule (pico-v3.md §1.5 preview deltas, §5.2 previews): a
// task's preview is what its task made of it. No built-in kind moves an
// array's elements, deletes an object's key, truncates a string or
// replaces its preview whole, so the tracker's and the differ's paths for
// them were never put to the test. A program's shape cN STEPS line starts
// a task of picosim's own kind (a shaper) in conversation N, which
// reshapes its preview STEPS times, each step one of every mutation a
// Tracker has, drawn at random and valid for the value as it stands,
// applied to the tracker and, by picosim's own code, to a value of its
// own; each step's scratch commit holds that value. After each:
//   - Harness.Preview of the task reads that value;
//   - a shaper with an even id watches its own conversation, and the
//     watch's folded preview of the task, a virtual millisecond on, is
//     that value too (unless the watch lagged); what the watch received
//     of it is the change, not the whole preview again (but for the
//     invocation's first step, whose tracker is new, and a replacement),
//     and nothing for a step that changed nothing (§1.5);
//   - a shaper with an odd id leaves its tracker alone while nothing
//     watches it (PreviewWatched), so that the harness rebuilds the
//     preview from its scratch (InitPreview) before anything reads it.
//
// A shaper enters an inflight status after its first step, so a reopen
// recovers it (KindFuncs.Recover) from its scratch, where it goes on.

// ruleShape: a preview is what its task made of it.
const ruleShape oracleRule = "a-preview-is-what-its-task-made"

// shaperStatuses are the shaper's: queued until it starts, shaping
// (inflight) once it has, done or aborted.
var shaperStatuses = core.Statuses{Name: "picosim.shaper", Initial: "queued", Roles: map[string]storage.TaskRole{
	"queued": storage.RoleStart, "shaping": storage.RoleInflight, "done": storage.RoleTerminal, "aborted": storage.RoleTerminal}}

// shapeScratch is where a shaper keeps its progress and its preview.
var shapeScratch = storage.ScratchValue[json.RawMessage]("picosim.shape")

// shapeRecord is a shaper's scratch: the steps done, of how many, and the
// preview they made.
type shapeRecord struct {
	Step    int `json:"step"`
	Steps   int `json:"steps"`
	Preview any `json:"preview"`
}

// shaperKind is the kind, with a preview its scratch rebuilds.
type shaperKind struct{ core.KindFuncs }

// InitPreview is the preview the task's scratch holds, or the first one.
func (shaperKind) InitPreview(_ context.Context, _ *storage.Task, sc core.ScratchReader) (any, error) {
	v, ok, err := sc.GetValue(shapeScratch.Address)
	if err != nil || !ok {
		return firstShape(), err
	}
	rec, err := decodeShape(v.Value)
	return rec.Preview, err
}

// firstShape is a shaper's preview before its first step.
func firstShape() any {
	return map[string]any{"log": "", "items": []any{}, "meta": map[string]any{}}
}

// decodeShape reads a shaper's scratch, its numbers as json.Number (a
// tracker's values).
func decodeShape(raw []byte) (shapeRecord, error) {
	var rec shapeRecord
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	err := d.Decode(&rec)
	return rec, err
}

// shaperKind builds the kind, its findings e's oracle's.
func (e *env) shaperKind() core.TaskKind {
	run := func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
		return e.shape(ctx, task, rt)
	}
	return shaperKind{core.KindFuncs{
		Statuses:    shaperStatuses,
		ExecuteFunc: run,
		RecoverFunc: run,
		AbortFunc: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "aborted", nil); return nil })
			return err
		},
	}}
}

// shape runs a shaper from where its scratch left it.
func (e *env) shape(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	h := rt.Harness()
	rec := shapeRecord{Preview: firstShape()}
	if v, ok, err := h.Store().GetValue(ctx, shapeScratch.In(task.ID).Address, 0); err != nil {
		return err
	} else if ok {
		if rec, err = decodeShape(v.Value); err != nil {
			return err
		}
	}
	var spec struct{ Steps int }
	if err := json.Unmarshal(task.State, &spec); err != nil {
		return err
	}
	rec.Steps = spec.Steps
	if task.Status == "queued" {
		if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
			tx.Patch(task.ID, core.TaskPatch{Status: "shaping"})
			return nil
		}); err != nil {
			return err
		}
	}
	tr, err := rt.Preview(ctx)
	if err != nil {
		return err
	}
	var w *core.WatchHandle
	lagged := false
	// Of this step's outputs the watch received: how many, and the lengths
	// of those that replace the root.
	outputs, replaced := 0, []int(nil)
	if task.ID%2 == 0 {
		if w, err = h.Watch(ctx, task.ConversationID, core.WatchOptions{}); err != nil {
			return err
		}
		defer w.Unsubscribe()
		if err := w.Start(ctx, func(ev core.ConversationEvent) {
			lagged = lagged || ev.Type == core.EventFault
			if ev.Type == core.EventTaskOutput && ev.TaskID == task.ID {
				outputs++
				if delta.IsBase(ev.Ops) {
					replaced = append(replaced, len(ev.Ops))
				}
			}
		}); err != nil {
			return err
		}
	}
	first := true // this invocation's first flush replaces: the tracker is new
	// A finding ends the shaping, not the session: the task settles, and
	// the run reports the oracle's finding as its first.
	broken := false
	fail := func(format string, args ...any) {
		_ = e.oracle.fail(broke(ruleShape, "shaper task %d, step %d of %d: %s", task.ID, rec.Step, rec.Steps, fmt.Sprintf(format, args...)))
		broken = true
	}
	for rec.Step < rec.Steps && !broken {
		rng := seededRNG(e.spec.seed, fmt.Sprintf("shape %d %d", task.ID, rec.Step))
		ops := []shapeOp{drawShapeOp(rng, rec.Preview)}
		before := rec.Preview
		rec.Preview = ops[0].apply(rec.Preview)
		if e.spec.seed%2 == 0 {
			// On even seeds a step is a window of one to three mutations,
			// which its flush diffs together.
			more := seededRNG(e.spec.seed, fmt.Sprintf("shape window %d %d", task.ID, rec.Step))
			for range more.IntN(3) {
				op := drawShapeOp(more, rec.Preview)
				ops, rec.Preview = append(ops, op), op.apply(rec.Preview)
			}
		}
		op, replaces := windowOf(ops)
		if task.ID%2 == 0 || rt.PreviewWatched() {
			if err := op.track(tr); err != nil {
				fail("the tracker refuses %s: %v", op.name, err)
				break
			}
		}
		rec.Step++
		if _, err := rt.Scratch(ctx, func(sc core.ScratchTx) error {
			sc.SetValue(shapeScratch.Address, rec)
			return nil
		}); err != nil {
			return err
		}
		got, ok, err := h.Preview(ctx, task.ID)
		if err != nil {
			return err
		}
		if !ok || !sameJSON(got, rec.Preview) {
			fail("after %s, Harness.Preview reads %s (has one: %t); the task made %s", op.name, previewText(got), ok, previewText(rec.Preview))
		}
		if err := rt.Sleep(ctx, rt.Now().Add(time.Millisecond)); err != nil {
			return err
		}
		if w != nil && !lagged {
			if v := w.View(); !v.Faulted {
				if got, ok := v.Previews[task.ID]; !ok || !sameJSON(got, rec.Preview) {
					fail("after %s, the watch of conversation %d folds the preview to %s (has one: %t); the task made %s",
						op.name, task.ConversationID, previewText(got), ok, previewText(rec.Preview))
				}
			}
			switch {
			case first:
			case outputs > 0 && sameJSON(before, rec.Preview) && !replaces:
				fail("after %s, which changed nothing, the watch of conversation %d received %d outputs of the preview", op.name, task.ConversationID, outputs)
			case len(replaced) > 0 && !replaces:
				fail("after %s, the watch of conversation %d received the whole preview again (%d ops), not the change", op.name, task.ConversationID, replaced[0])
			}
		}
		outputs, replaced, first = 0, nil, false
	}
	_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "done", nil); return nil })
	return err
}

// shapeReplaceName is the one step whose flush replaces the whole preview.
const shapeReplaceName = "a replacement of the whole"

// shapeOp is one step: its name, how the tracker makes it, and how
// picosim's own code makes it of a value (a new one: the old is left as
// it was).
type shapeOp struct {
	name  string
	track func(tr *delta.Tracker) error
	apply func(v any) any
}

// windowOf is the step that makes ops in order, in one window of the
// tracker (their apply is not needed: the caller applied each as drawn),
// and whether one of them replaces the whole preview.
func windowOf(ops []shapeOp) (w shapeOp, replaces bool) {
	for _, op := range ops {
		replaces = replaces || op.name == shapeReplaceName
	}
	if len(ops) == 1 {
		return ops[0], replaces
	}
	w = shapeOp{track: func(tr *delta.Tracker) error {
		for _, op := range ops {
			if err := op.track(tr); err != nil {
				return err
			}
		}
		return nil
	}}
	names := make([]string, len(ops))
	for i, op := range ops {
		names[i] = op.name
	}
	w.name = strings.Join(names, ", then ")
	return w, replaces
}

// drawShapeOp draws a step valid for v, a shaper's preview: an object of
// a log string, an items array (numbers and objects with a tags array)
// and a meta object.
func drawShapeOp(rng *rand.Rand, v any) shapeOp {
	root := v.(map[string]any)
	log, items, meta := root["log"].(string), root["items"].([]any), root["meta"].(map[string]any)
	word := func() string { return []string{"a", "bc", "def", " ", "ghij"}[rng.IntN(5)] }
	scalar := func() any {
		if rng.IntN(3) == 0 {
			return word()
		}
		return json.Number(strconv.Itoa(rng.IntN(100)))
	}
	item := func() any {
		if rng.IntN(2) == 0 {
			return json.Number(strconv.Itoa(rng.IntN(100)))
		}
		return map[string]any{"id": json.Number(strconv.Itoa(rng.IntN(100))), "tags": []any{word()}}
	}
	// with is v with root key k's value changed by f, on a copy.
	with := func(k string, f func(old any) any) func(any) any {
		return func(v any) any {
			out := cloneShape(v).(map[string]any)
			out[k] = f(out[k])
			return out
		}
	}
	var tagged []int
	for i, it := range items {
		if _, ok := it.(map[string]any); ok {
			tagged = append(tagged, i)
		}
	}
	key := []string{"a", "b", "c", "d"}[rng.IntN(4)]
	switch n := len(items); rng.IntN(13) {
	case 0, 1:
		s := word() + word()
		return shapeOp{"an append to the log", func(tr *delta.Tracker) error { return tr.AppendString(delta.Path{"log"}, s) },
			with("log", func(old any) any { return old.(string) + s })}
	case 2:
		cut := rng.IntN(len(log) + 1)
		return shapeOp{fmt.Sprintf("a truncation of the log by %d", cut), func(tr *delta.Tracker) error { return tr.TruncateString(delta.Path{"log"}, cut) },
			with("log", func(old any) any { return old.(string)[cut:] })}
	case 3:
		x := scalar()
		if rng.IntN(3) == 0 {
			x = item()
		}
		return shapeOp{fmt.Sprintf("a set of meta %q", key), func(tr *delta.Tracker) error { return tr.Set(delta.Path{"meta", key}, cloneShape(x)) },
			with("meta", func(old any) any { old.(map[string]any)[key] = cloneShape(x); return old })}
	case 4:
		_, had := meta[key]
		return shapeOp{fmt.Sprintf("a delete of meta %q (there: %t)", key, had), func(tr *delta.Tracker) error { return tr.Delete(delta.Path{"meta", key}) },
			with("meta", func(old any) any { delete(old.(map[string]any), key); return old })}
	case 5:
		add := []any{item()}
		if rng.IntN(2) == 0 {
			add = append(add, item())
		}
		return shapeOp{fmt.Sprintf("a push of %d items", len(add)), func(tr *delta.Tracker) error { return tr.Push(delta.Path{"items"}, cloneItems(add)...) },
			with("items", func(old any) any { return append(old.([]any), cloneItems(add)...) })}
	case 6, 7:
		at := rng.IntN(n + 1)
		remove := rng.IntN(n - at + 2) // one past the end now and then: clamped
		var add []any
		for range rng.IntN(3) {
			add = append(add, item())
		}
		return shapeOp{fmt.Sprintf("a splice at %d removing %d inserting %d", at, remove, len(add)),
			func(tr *delta.Tracker) error { return tr.Splice(delta.Path{"items"}, at, remove, cloneItems(add)...) },
			with("items", func(old any) any {
				arr := old.([]any)
				out := append(append([]any{}, arr[:at]...), cloneItems(add)...)
				return append(out, arr[min(at+remove, len(arr)):]...)
			})}
	case 8:
		if n < 2 {
			break
		}
		perm := rng.Perm(n)
		return shapeOp{fmt.Sprintf("a reorder by %v", perm), func(tr *delta.Tracker) error { return tr.Reorder(delta.Path{"items"}, perm) },
			with("items", func(old any) any {
				arr := old.([]any)
				out := make([]any, len(arr))
				for i, p := range perm {
					out[i] = arr[p]
				}
				return out
			})}
	case 9:
		at := rng.IntN(n + 1) // n appends
		x := item()
		return shapeOp{fmt.Sprintf("a set of item %d", at), func(tr *delta.Tracker) error { return tr.Set(delta.Path{"items", at}, cloneShape(x)) },
			with("items", func(old any) any {
				arr := old.([]any)
				if at == len(arr) {
					return append(arr, cloneShape(x))
				}
				arr[at] = cloneShape(x)
				return arr
			})}
	case 10:
		if n == 0 {
			break
		}
		at := rng.IntN(n)
		return shapeOp{fmt.Sprintf("a delete of item %d", at), func(tr *delta.Tracker) error { return tr.Delete(delta.Path{"items", at}) },
			with("items", func(old any) any { return slices.Delete(old.([]any), at, at+1) })}
	case 11:
		if len(tagged) == 0 {
			break
		}
		at, tag := tagged[rng.IntN(len(tagged))], word()
		return shapeOp{fmt.Sprintf("a push to item %d's tags", at), func(tr *delta.Tracker) error { return tr.Push(delta.Path{"items", at, "tags"}, tag) },
			with("items", func(old any) any {
				obj := old.([]any)[at].(map[string]any)
				obj["tags"] = append(obj["tags"].([]any), tag)
				return old
			})}
	case 12:
		if rng.IntN(2) == 0 {
			break
		}
		next := map[string]any{"log": word(), "items": []any{item()}, "meta": map[string]any{key: scalar()}}
		return shapeOp{shapeReplaceName, func(tr *delta.Tracker) error { return tr.Replace(cloneShape(next)) },
			func(any) any { return cloneShape(next) }}
	}
	s := word()
	return shapeOp{"an append to the log", func(tr *delta.Tracker) error { return tr.AppendString(delta.Path{"log"}, s) },
		with("log", func(old any) any { return old.(string) + s })}
}

// cloneShape is a deep copy of a preview value.
func cloneShape(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			out[k] = cloneShape(x[k])
		}
		return out
	case []any:
		return cloneItems(x)
	}
	return v
}

func cloneItems(xs []any) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = cloneShape(x)
	}
	return out
}

// shapeSeeds is how often a drawn program starts shapers: every seventh
// seed from 3, not the golden traces' seed 1.
const shapeSeeds = 7

// drawShapes has the program of every shapeSeeds-th seed from 3 start one
// or two shapers of 4 to 24 steps, from a generator of its own, at random
// places before the final drive, in the root or the newest conversation.
func drawShapes(p *program, seed uint64) {
	if seed%shapeSeeds != 3 {
		return
	}
	rng := seededRNG(seed, "shapes")
	for range 1 + rng.IntN(2) {
		l := progLine{op: "shape", args: []string{[]string{"c0", "c-1"}[rng.IntN(2)], strconv.Itoa(4 + rng.IntN(21))}}
		p.lines = slices.Insert(p.lines, rng.IntN(len(p.lines)), l)
	}
	// Half of them, from a generator of their own, also shape a fork that
	// nobody watches: its shaper leaves the preview alone, and every read
	// of it must rebuild it.
	if alone := seededRNG(seed, "unwatched shapes"); alone.IntN(2) == 0 {
		p.lines = slices.Insert(p.lines, alone.IntN(len(p.lines)), progLine{op: "fork", args: []string{"c0", "0"}},
			progLine{op: "shape", args: []string{"c-1", strconv.Itoa(4 + alone.IntN(21))}})
	}
}

// startShaper runs a program's shape line: a shaper of steps steps in
// conversation conv, in the background.
func (g *programRun) startShaper(ctx context.Context, conv storage.ID, steps int) error {
	_, err := g.e.h.Commit(ctx, func(tx *core.Tx) error {
		tx.Task(shaperStatuses, core.TaskSpec{ConversationID: conv, Background: true, State: map[string]int{"steps": steps}})
		return nil
	})
	return err
}
