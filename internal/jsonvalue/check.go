package jsonvalue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sync/atomic"
)

// checking is SetChecking's switch.
var checking atomic.Bool

// SetChecking turns on or off, for the whole process, holding every JSON
// fast path written by hand (a decoder built on this package, a
// hand-written encoder) to the encoding/json path it stands in for: each
// site asks Checking and, when it is on, runs both and calls Agree.
// core.SetCheckJSON is the door simulators and tests use.
func SetChecking(on bool) { checking.Store(on) }

// Checking reports whether SetChecking is on.
func Checking() bool { return checking.Load() }

// FastPathError is the panic of a fast path that parted from encoding/json
// under SetChecking: What names the path, Detail how they differ.
type FastPathError struct {
	What   string
	Detail string
}

func (e *FastPathError) Error() string {
	return fmt.Sprintf("json fast path %s parted from encoding/json: %s", e.What, e.Detail)
}

// Agree panics with Differ's error, when there is one.
func Agree(what string, data []byte, fast, slow any, slowErr error) {
	if err := Differ(what, data, fast, slow, slowErr); err != nil {
		panic(err)
	}
}

// Differ is a *FastPathError for the fast path what when fast, what it
// read of data, is not reflect.DeepEqual to slow, what encoding/json read,
// or when encoding/json refused data (slowErr) that the fast path took;
// nil when they agree. A path that runs on goroutines of its own (a JSONL
// replay parses ahead) returns it rather than panic there.
func Differ(what string, data []byte, fast, slow any, slowErr error) error {
	switch {
	case slowErr != nil:
		return &FastPathError{What: what, Detail: fmt.Sprintf("it took %s, which encoding/json refuses: %v", clip(data), slowErr)}
	case !reflect.DeepEqual(fast, slow):
		return &FastPathError{What: what, Detail: fmt.Sprintf("it read %s otherwise: %s", clip(data), parting(fast, slow))}
	}
	return nil
}

// parting says where two values that are not reflect.DeepEqual part, by
// their JSON encodings (never their pointers, which differ from run to
// run), or that they encode alike (a nil and an empty slice, say).
func parting(fast, slow any) string {
	a, aerr := json.Marshal(fast)
	b, berr := json.Marshal(slow)
	switch {
	case aerr != nil || berr != nil:
		return fmt.Sprintf("(not encodable: %v, %v)", aerr, berr)
	case bytes.Equal(a, b):
		return "the two encode alike but are not reflect.DeepEqual (a nil against an empty slice or map?): " + clip(a)
	}
	return Parting("the fast path's", a, "encoding/json's", b)
}

// Parting says where the texts a and b, named an and bn, part: the byte,
// and each text around it.
func Parting(an string, a []byte, bn string, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	around := func(t []byte) string {
		lo, hi := max(0, i-80), min(len(t), i+80)
		return "…" + string(t[lo:hi]) + "…"
	}
	return fmt.Sprintf("from byte %d: %s %s against %s %s", i, an, around(a), bn, around(b))
}

// clip is data, cut to a few hundred bytes for a message.
func clip(data []byte) string {
	const max = 300
	if len(data) > max {
		return string(data[:max]) + "…"
	}
	return string(data)
}
