package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestDemoOutputIsGolden(t *testing.T) {
	var out bytes.Buffer
	if err := demo(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if failures := sweep(&out, false); failures > 0 {
		t.Fatalf("%d seeds failed:\n%s", failures, out.String())
	}
	const golden = "testdata/demo.golden"
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/picosim -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("demo output:\n%s\nwant:\n%s\n(if the change is intended: go test ./cmd/picosim -update)", out.Bytes(), want)
	}
}
