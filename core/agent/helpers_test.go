package agent_test

import "github.com/pico-go/pico/sim/simtest"

// must is simtest.Must, short for the many calls.
func must[T any](v T, err error) T { return simtest.Must(v, err) }
