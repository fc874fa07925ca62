// Package memstat reads the process's memory for benchmarks: the live Go
// heap after a collection and the resident set.
package memstat

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// Settled collects garbage, returns freed memory to the system, and reads
// the live Go heap and the resident set (0 where /proc is unavailable), in
// MB.
func Settled() (heapMB, rssMB float64) {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20), RSS()
}

// RSS reads the resident set from /proc/self/statm (Linux), in MB; 0 where
// it cannot.
func RSS() float64 {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(raw))
	if len(fields) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return 0
	}
	return float64(pages*int64(os.Getpagesize())) / (1 << 20)
}
