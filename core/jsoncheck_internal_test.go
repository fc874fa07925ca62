package core

import (
	"errors"
	"strings"
	"testing"
)

// checkMerged passes a splice that is what the maps give and panics with
// the json invariant, naming where they part, on one that is not.
func TestCheckMergedHoldsTheSpliceToTheMaps(t *testing.T) {
	old, patch := []byte(`{"a":1,"b":2}`), []byte(`{"b":3}`)
	spliced, ok := mergeObjects(old, patch)
	if !ok || string(spliced) != `{"a":1,"b":3}` {
		t.Fatalf("mergeObjects = %s, %t", spliced, ok)
	}
	checkMerged(old, patch, spliced)
	defer func() {
		var ie *DriverInvariantError
		err, _ := recover().(error)
		if !errors.As(err, &ie) || ie.Invariant != "json" || !strings.Contains(ie.Detail, "from byte 11") {
			t.Fatalf("checkMerged of a wrong splice panicked with %v; want the json invariant parting at byte 11", err)
		}
	}()
	checkMerged(old, patch, []byte(`{"a":1,"b":2,"b":3}`))
}
