package sim_test

import (
	"strings"
	"testing"

	"github.com/pico-go/pico/sim"
)

func TestParseStrategyNamesRoundTripAndBadNamesAreRejected(t *testing.T) {
	for name, want := range map[string]string{
		"random": "random", "": "random", "pct": "pct:3:10000", "pct:2:50": "pct:2:50",
		"forced:a:x,b:y": "forced:a:x,b:y",
	} {
		s, err := sim.ParseStrategy(name)
		if err != nil || s.Name() != want {
			t.Errorf("ParseStrategy(%q) = %v, %v; want %s", name, s, err, want)
		}
	}
	for name, mention := range map[string]string{
		"chaos": "unknown strategy", "pct:0:5": "positive", "pct:3": "pct:DEPTH:STEPS",
		"pct:x:5": "positive", "forced:nolabel": "actor:point",
	} {
		if _, err := sim.ParseStrategy(name); err == nil || !strings.Contains(err.Error(), mention) {
			t.Errorf("ParseStrategy(%q) error = %v; want one mentioning %q", name, err, mention)
		}
	}
}
