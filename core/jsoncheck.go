package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sync/atomic"
)

// checkJSON is SetCheckJSON's switch.
var checkJSON atomic.Bool

// SetCheckJSON turns on or off, for the whole process, holding the payload
// codecs written by hand to encoding/json: every value Marshal encodes by
// its AppendJSON (JSONAppender) is encoded by json.Marshal too, and every
// text Unmarshal reads by a DecodeJSON (JSONDecoder) is read by
// json.Unmarshal too; bytes that differ, or values that are not
// reflect.DeepEqual, panic with a *DriverInvariantError "json" naming the
// type and where they part. Types that are json.Marshaler or
// json.Unmarshaler are skipped: encoding/json would call their own code.
// It is for simulators and tests, where a seed's run stands for every
// payload the run commits and reads; it about doubles the JSON work, so
// nothing else should turn it on. The check changes nothing it passes.
func SetCheckJSON(on bool) { checkJSON.Store(on) }

// checkAppended holds raw, what v's AppendJSON wrote, to json.Marshal(v).
func checkAppended(v any, raw []byte) {
	if _, own := v.(json.Marshaler); own {
		return
	}
	want, err := json.Marshal(v)
	if err != nil || bytes.Equal(raw, want) {
		return
	}
	i := 0
	for i < len(raw) && i < len(want) && raw[i] == want[i] {
		i++
	}
	panic(&DriverInvariantError{Invariant: "json", Detail: fmt.Sprintf(
		"%T's AppendJSON wrote what json.Marshal does not, from byte %d: AppendJSON %s, json.Marshal %s", v, i, excerpt(raw, i), excerpt(want, i))})
}

// checkDecoded holds *got, what a DecodeJSON read of data, to
// json.Unmarshal's reading.
func checkDecoded[T any](data []byte, got *T) {
	var want T
	if _, own := any(&want).(json.Unmarshaler); own {
		return
	}
	if err := json.Unmarshal(data, &want); err != nil {
		panic(&DriverInvariantError{Invariant: "json", Detail: fmt.Sprintf(
			"%T's DecodeJSON took %s, which json.Unmarshal refuses: %v", got, excerpt(data, 0), err)})
	}
	if !reflect.DeepEqual(*got, want) {
		panic(&DriverInvariantError{Invariant: "json", Detail: fmt.Sprintf(
			"%T's DecodeJSON read %s as %+v; json.Unmarshal reads %+v", got, excerpt(data, 0), *got, want)})
	}
}
