package core

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/pico-go/pico/internal/jsonvalue"
)

// SetCheckJSON turns on or off, for the whole process, holding the JSON
// codecs written by hand to encoding/json: every value Marshal encodes by
// its AppendJSON (JSONAppender) is encoded by json.Marshal too, every text
// Unmarshal reads by a DecodeJSON (JSONDecoder) is read by json.Unmarshal
// too, and every task state patch merged by splicing (mergeObjects) is
// merged by way of maps too; bytes that differ, or values that are not
// reflect.DeepEqual, panic with a *DriverInvariantError "json" naming the
// type and where they part. Types that are json.Marshaler or
// json.Unmarshaler are skipped: encoding/json would call their own code.
// The other fast paths (a system entry's data, a stored message, a JSONL
// line, a store's write encoder) are held alike and fail with a
// *jsonvalue.FastPathError. It is for simulators and tests, where a seed's
// run stands for every payload the run commits and reads; it about doubles
// the JSON work, so nothing else should turn it on. The check changes
// nothing it passes.
func SetCheckJSON(on bool) { jsonvalue.SetChecking(on) }

// checkAppended holds raw, what v's AppendJSON wrote, to json.Marshal(v).
func checkAppended(v any, raw []byte) {
	if _, own := v.(json.Marshaler); own {
		return
	}
	want, err := json.Marshal(v)
	if err != nil || bytes.Equal(raw, want) {
		return
	}
	panic(&DriverInvariantError{Invariant: "json", Detail: fmt.Sprintf(
		"%T's AppendJSON wrote what json.Marshal does not, %s", v, jsonvalue.Parting("AppendJSON", raw, "json.Marshal", want))})
}

// checkDecoded holds *got, what a DecodeJSON read of data, to
// json.Unmarshal's reading.
func checkDecoded[T any](data []byte, got *T) {
	var want T
	if _, own := any(&want).(json.Unmarshaler); own {
		return
	}
	err := json.Unmarshal(data, &want)
	if err = jsonvalue.Differ(fmt.Sprintf("%T's DecodeJSON", got), data, *got, want, err); err != nil {
		panic(&DriverInvariantError{Invariant: "json", Detail: err.Error()})
	}
}

// checkMerged holds merged, what mergeObjects spliced of a state and its
// patch, to what merging them by way of maps gives.
func checkMerged(old, patch, merged []byte) {
	if want := mergeMaps(old, patch); !bytes.Equal(merged, want) {
		panic(&DriverInvariantError{Invariant: "json", Detail: "a task state and its patch merge otherwise by splicing than by way of maps, " +
			jsonvalue.Parting("spliced", merged, "by maps", want)})
	}
}
