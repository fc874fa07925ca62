//go:build planted

package plant

import "os"

// On reports whether the planted bug name is the one PICO_PLANT names. It
// reads the variable each time, so that one test process can measure the
// bugs one after another.
func On(name string) bool { return name == os.Getenv("PICO_PLANT") }

// Active is the planted bug that is on, or "": what a cache of the
// harness's own output keys on, when one process measures bug after bug.
func Active() string { return os.Getenv("PICO_PLANT") }
