package agent_test

import (
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
)

// must is simtest.Must, short for the many calls.
func must[T any](v T, err error) T { return simtest.Must(v, err) }

// mustWrite is must for Conversation.Write's input and entry ids.
func mustWrite(input, entry storage.ID, err error) (storage.ID, storage.ID) {
	must(0, err)
	return input, entry
}
