package sim_test

import (
	"strings"
	"testing"

	"github.com/pico-go/pico/sim"
)

func TestParseStrategyNamesRoundTripAndBadNamesAreRejected(t *testing.T) {
	for name, want := range map[string]string{
		"random": "random", "": "random", "pct": "pct:3:10000", "pct:2:50": "pct:2:50",
		"pct:100:5000000": "pct:100:5000000",
		"forced:a:x,b:y":  "forced:a:x,b:y",
	} {
		s, err := sim.ParseStrategy(name)
		if err != nil || s.Name() != want {
			t.Errorf("ParseStrategy(%q) = %v, %v; want %s", name, s, err, want)
		}
	}
	for name, mention := range map[string]string{
		"chaos": "unknown strategy", "pct:0:5": "positive", "pct:3": "pct:DEPTH:STEPS",
		"pct:x:5": "positive", "forced:nolabel": "actor:point",
		// Beyond the bounds: the first used to exhaust memory drawing change points.
		"pct:9223372036854775807:1": "at most 100", "pct:101:5": "at most 100",
		"pct:2:5000001": "steps at most 5000000", "pct:99999999999999999999:1": "positive",
	} {
		if _, err := sim.ParseStrategy(name); err == nil || !strings.Contains(err.Error(), mention) {
			t.Errorf("ParseStrategy(%q) error = %v; want one mentioning %q", name, err, mention)
		}
	}
}
