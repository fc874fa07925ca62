//go:build !planted

// Package plant is the switch of the bugs planted to measure the fuzzer:
// each is a deliberate mistake in the harness, named, that a build with
// the planted tag turns on when PICO_PLANT names it. In every other build
// On is false and the compiler drops the planted branches.
//
//	go build -tags planted -o picosim-planted ./cmd/picosim
//	PICO_PLANT=inbox-cancel-placed ./picosim-planted fuzz --seeds 1000
//
// cmd/picosim's TestPlantedBugs (go test -tags planted) runs fuzz against
// each one and prints how soon it was found.
package plant

// On reports whether the planted bug name is on: never, in this build.
func On(name string) bool { return false }

// Active is the planted bug that is on: none, in this build.
func Active() string { return "" }
