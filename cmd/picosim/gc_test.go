package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// gcPercent reads the collector's target.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// picosim's target holds unless GOGC is set, and restore puts back the one
// it replaced.
func TestSetGCPercentYieldsToGOGC(t *testing.T) {
	t.Setenv("GOGC", "50") // put back after the test, as before it
	outer := gcPercent()
	restore := setGCPercent(250)
	if got := gcPercent(); got != outer {
		t.Errorf("with GOGC set, the target moved from %d to %d", outer, got)
	}
	restore()
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	restore = setGCPercent(250)
	if got := gcPercent(); got != 250 {
		t.Errorf("target %d after setGCPercent(250) without GOGC", got)
	}
	restore()
	if got := gcPercent(); got != outer {
		t.Errorf("target %d after restore; want %d back", got, outer)
	}
}
