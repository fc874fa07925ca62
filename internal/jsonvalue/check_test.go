package jsonvalue_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pico-go/pico/internal/jsonvalue"
)

// Differ is nil for reads that agree; for one that parts it names the
// path and says where their encodings part, never a pointer; for a text
// encoding/json refuses it carries that refusal; and Agree panics with it.
func TestDifferSaysWhereAFastPathParts(t *testing.T) {
	type rec struct {
		A string
		P *int
	}
	one, two := 1, 1
	if err := jsonvalue.Differ("x", []byte(`{}`), rec{"a", &one}, rec{"a", &two}, nil); err != nil {
		t.Fatalf("equal reads: %v", err)
	}
	err := jsonvalue.Differ("x", []byte(`{"A":"b"}`), rec{"a", &one}, rec{"b", &two}, nil)
	var fe *jsonvalue.FastPathError
	if !errors.As(err, &fe) || fe.What != "x" || !strings.Contains(fe.Detail, `from byte 6`) || strings.Contains(fe.Detail, "0x") {
		t.Fatalf("differing reads: %v; want a FastPathError parting at byte 6, no pointers", err)
	}
	err = jsonvalue.Differ("x", []byte(`{`), rec{}, rec{}, errors.New("unexpected end"))
	if !errors.As(err, &fe) || !strings.Contains(fe.Detail, "unexpected end") {
		t.Fatalf("a refused text: %v", err)
	}
	type opt struct {
		S []int `json:",omitempty"`
	}
	if err := jsonvalue.Differ("x", nil, opt{}, opt{S: []int{}}, nil); err == nil || !strings.Contains(err.Error(), "encode alike") {
		t.Fatalf("nil against empty: %v", err)
	}
	defer func() {
		if r, _ := recover().(*jsonvalue.FastPathError); r == nil {
			t.Fatalf("Agree of differing reads did not panic with a FastPathError")
		}
	}()
	jsonvalue.Agree("x", nil, 1, 2, nil)
}
