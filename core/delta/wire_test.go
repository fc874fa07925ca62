package delta_test

import (
	"errors"
	"testing"

	"github.com/pico-go/pico/core/delta"
)

func TestDecoderIsStrict(t *testing.T) {
	rows := []struct {
		name  string
		batch string
		index int
		class error
	}{
		{"not an array", `{}`, -1, delta.ErrMalformed},
		{"omitted path at the start of a batch", `[["a","x"]]`, 0, delta.ErrMalformed},
		{"omitted path after r", `[["s",["k"],1],["r",{}],["d"]]`, 2, delta.ErrMalformed},
		{"undefined id", `[["a",0,"x"]]`, 0, delta.ErrMalformed},
		{"id defined out of order", `[["#",1,["x"]]]`, 0, delta.ErrMalformed},
		{"negative id", `[["#",-1,["x"]]]`, 0, delta.ErrMalformed},
		{"# arity", `[["#",0]]`, 0, delta.ErrMalformed},
		{"# with a string path", `[["#",0,"x"]]`, 0, delta.ErrMalformed},
		{"# with a reserved segment", `[["#",0,["prototype"]]]`, 0, delta.ErrMalformed},
		{"unknown verb", `[["s",["x"],1],["q",["x"]]]`, 1, delta.ErrMalformed},
		{"s arity", `[["s",["x"],1,2]]`, 0, delta.ErrMalformed},
		{"d arity", `[["d",["x"],1]]`, 0, delta.ErrMalformed},
		{"p arity", `[["p",0,0]]`, 0, delta.ErrMalformed},
		{"string path ref", `[["s","x",1]]`, 0, delta.ErrMalformed},
		{"fractional id", `[["#",0,["x"]],["a",0.5,"x"]]`, 1, delta.ErrMalformed},
		{"omitted path is the root for a", `[["p",[],0,0,[]],["a","x"]]`, 1, delta.ErrMalformed},
		{"bad count in short form", `[["t",["x"],1],["t",-1]]`, 1, delta.ErrMalformed},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			_, err := delta.NewDecoder().Decode([]byte(r.batch))
			var opErr *delta.OpError
			if !errors.As(err, &opErr) || !errors.Is(err, r.class) || opErr.Index != r.index {
				t.Fatalf("Decode(%s) err = %v; want an *OpError at index %d of class %v", r.batch, err, r.index, r.class)
			}
		})
	}
}

func TestFailedDecodeLeavesTheDictionary(t *testing.T) {
	dec := delta.NewDecoder()
	if _, err := dec.Decode([]byte(`[["#",0,["x"]],["a",0,"1"],["zz"]]`)); err == nil {
		t.Fatal("Decode of a batch ending in a bad op succeeded")
	}
	if _, err := dec.Decode([]byte(`[["a",0,"2"]]`)); err == nil {
		t.Fatal("id 0 from the rejected batch is defined")
	}
	ops, err := dec.Decode([]byte(`[["#",0,["y"]],["a",0,"2"]]`))
	if err != nil || len(ops) != 1 || ops[0].Path.String() != `["y"]` {
		t.Fatalf("Decode after the rejected batch = %v, %v; want one a on [\"y\"]", ops, err)
	}
	// An r in a rejected batch does not clear the dictionary either.
	if _, err := dec.Decode([]byte(`[["r",{}],["zz"]]`)); err == nil {
		t.Fatal("Decode of a batch ending in a bad op succeeded")
	}
	if _, err := dec.Decode([]byte(`[["a",0,"3"]]`)); err != nil {
		t.Fatalf("id 0 was lost to a rejected batch: %v", err)
	}
}

func TestFailedEncodeLeavesTheDictionary(t *testing.T) {
	enc := delta.NewEncoder()
	checkWire(t, enc, delta.NewDecoder(), opsOf(t, `[["a",["x"],"1"]]`), `[["a",["x"],"1"]]`)
	_, err := enc.Encode([]delta.Op{delta.Append(delta.Path{"x"}, "2"), {Verb: "?"}})
	var opErr *delta.OpError
	if !errors.As(err, &opErr) || opErr.Index != 1 || !errors.Is(err, delta.ErrMalformed) {
		t.Fatalf("Encode with a bad op at 1: err = %v", err)
	}
	// Still the second use of ["x"]: the failed batch left no trace.
	wire, err := enc.Encode(opsOf(t, `[["a",["x"],"3"]]`))
	if err != nil || string(wire) != `[["#",0,["x"]],["a",0,"3"]]` {
		t.Fatalf("Encode = %s, %v; want the definition of id 0", wire, err)
	}
}
