package storage

import (
	"errors"
	"strings"
	"testing"

	"github.com/pico-go/pico/internal/jsonvalue"
)

// Under jsonvalue.SetChecking, AppendWrite holds its bytes to json.Marshal:
// a write it encodes as json.Marshal does goes through, and bytes that part
// from json.Marshal's panic with a FastPathError naming the write's type
// and where they part.
func TestAppendWriteIsHeldToJSONMarshal(t *testing.T) {
	jsonvalue.SetChecking(true)
	defer jsonvalue.SetChecking(false)
	w := &Write{Type: WriteSettle, ID: 7, Status: "done", Role: RoleTerminal, State: []byte(`{"a":"<b>"}`)}
	if _, ok := AppendWrite(nil, w); !ok {
		t.Fatalf("AppendWrite of a settle failed")
	}
	defer func() {
		var fe *jsonvalue.FastPathError
		err, _ := recover().(error)
		if !errors.As(err, &fe) || !strings.Contains(fe.Detail, "settle write") || !strings.Contains(fe.Detail, "from byte 1:") {
			t.Fatalf("bytes that part panicked with %v; want a FastPathError naming the settle write, parting at byte 1", err)
		}
	}()
	checkAppendedWrite(*w, []byte(`{}`))
}
