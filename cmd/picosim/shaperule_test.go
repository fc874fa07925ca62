package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pico-go/pico/core/delta"
)

// picosim's own reading of each step and the tracker's agree: after every
// step the tracker's value is the shaper's, and a replica that folds each
// flush's ops holds it too. Every kind of step is drawn.
func TestAShapeStepIsWhatTheTrackerMakes(t *testing.T) {
	drawn := map[string]bool{}
	for seed := uint64(1); seed <= 40; seed++ {
		v := firstShape()
		tr := delta.NewTracker(cloneShape(v))
		replica := cloneShape(v)
		for step := range 60 {
			op := drawShapeOp(seededRNG(seed, fmt.Sprintf("shape test %d", step)), v)
			drawn[strings.FieldsFunc(op.name, func(r rune) bool { return r >= '0' && r <= '9' || r == '"' || r == '[' })[0]] = true
			if err := op.track(tr); err != nil {
				t.Fatalf("seed %d step %d: the tracker refuses %s: %v", seed, step, op.name, err)
			}
			before := previewText(v)
			v = op.apply(v)
			if previewText(v) == before && op.name == "a replacement of the whole" {
				t.Fatalf("seed %d step %d: %s changed nothing", seed, step, op.name)
			}
			if !sameJSON(tr.State(), v) {
				t.Fatalf("seed %d step %d: after %s the tracker holds %s; the shaper %s", seed, step, op.name, previewText(tr.State()), previewText(v))
			}
			var err error
			if replica, err = delta.ApplyImmutable(replica, tr.Flush()); err != nil || !sameJSON(replica, v) {
				t.Fatalf("seed %d step %d: after %s a replica folds to %s (%v); the shaper holds %s", seed, step, op.name, previewText(replica), err, previewText(v))
			}
		}
	}
	for _, want := range []string{"an append to the log", "a truncation of the log by ", "a set of meta ", "a delete of meta ", "a push of ",
		"a splice at ", "a reorder by ", "a set of item ", "a delete of item ", "a push to item ", "a replacement of the whole"} {
		if !drawn[want] {
			t.Errorf("no step %q was drawn (drawn: %v)", want, drawn)
		}
	}
}

// A program's shapers run under the rule, a reopen in the middle of them
// recovering them, and the trace replays.
func TestShapersRunUnderTheRule(t *testing.T) {
	text := `picosim program 1
swarm tail=2 shell=false queue=0 retry=0 chunk=0
respond text "fine"
shape c0 24
shape c0 20
accept c0 look
drive-async c0
sleep 8
reopen
drive c0
sleep 200
`
	_, _, data := runProgramFile(t, text, 9)
	for _, want := range []string{`"picosim.shaper"`, `"status":"shaping"`, `"status":"done"`, `.recover"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the trace has no %s", want)
		}
	}
}

// Programs of every shapeSeeds-th seed from 3 start shapers, and parse
// back; no other program does.
func TestShapesAreDrawnForTheirSeeds(t *testing.T) {
	drawnForSeeds(t, "shape", 60, func(seed uint64) bool { return seed%shapeSeeds == 3 })
}
