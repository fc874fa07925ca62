package memstat

import (
	"runtime"
	"testing"
)

var sink []byte

// A running process has a heap and, on Linux, a resident set at least as
// large as its live heap.
func TestSettledReadsHeapAndResidentSet(t *testing.T) {
	sink = make([]byte, 8<<20)
	for i := range sink {
		sink[i] = byte(i)
	}
	heap, rss := Settled()
	if heap < 8 {
		t.Fatalf("heap %.1f MB with 8 MB live", heap)
	}
	if rss != 0 && rss < heap {
		t.Fatalf("resident set %.1f MB below the live heap %.1f MB", rss, heap)
	}
	runtime.KeepAlive(sink)
}
