package jsonl_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pico-go/pico/storage/jsonl"
)

const (
	fuzzHeader  = `{"pico":"session","format":1}` + "\n"
	fuzzScratch = `{"pico":"scratch","format":1,"task":2}` + "\n"
	fuzzConv    = `{"first":1,"writes":[{"type":"createConversation","conversation":{"id":1}}]}` + "\n"
	fuzzTask    = `{"first":2,"writes":[{"type":"task","task":{"id":2,"conversationId":1,"kind":"k","status":"s","role":"inflight"}}]}` + "\n"
	fuzzFrame   = `{"first":3,"task":2,"writes":[{"type":"list.append","addr":{"scope":{"scratch":2},"namespace":"f"},"value":1}]}` + "\n"
)

// FuzzReplay opens arbitrary bytes as a session's main file and, beside
// it, a live task's scratch file. Open must not panic; it either fails with
// a *FileError and leaves both files exactly as they were, or yields a
// session that reopens to the same sequence, having cut at most torn final
// lines. The header rule (no header: refused, untouched) and the
// cross-file overlap rule are both in reach of the seeds.
func FuzzReplay(f *testing.F) {
	f.Add([]byte(fuzzHeader+fuzzConv), []byte(nil))
	f.Add([]byte(fuzzHeader+fuzzConv+fuzzTask), []byte(fuzzScratch+fuzzFrame))
	f.Add([]byte(fuzzHeader+fuzzConv+`{"first":2,"wri`), []byte(nil))
	f.Add([]byte(fuzzHeader+fuzzConv+fuzzTask+`{"first":3,"writes":[{"type":"entry","entry":{"id":3,"conversationId":1,"kind":"user"}}]}`+"\n"), []byte(fuzzScratch+fuzzFrame))
	f.Add([]byte(fuzzConv), []byte(nil))
	f.Add([]byte(fuzzHeader+fuzzConv+fuzzTask[:len(fuzzTask)-1]), []byte(fuzzScratch+fuzzFrame[:20]))
	f.Add([]byte("{oops}\n"), []byte("{}"))
	v2 := `{"pico":"session","format":2}` + "\n"
	f.Add([]byte(v2+fuzzConv+`{"first":2,"writes":[{"type":"task","task":{"id":2,"conversationId":1,"kind":"k","status":"s","role":"inflight","state":{"a":1,"b":[2]}}}]}`+"\n"+
		`{"first":3,"writes":[{"type":"patch","id":2,"stateMerge":{"c":3},"stateDrop":["a"]}]}`+"\n"), []byte(nil))
	f.Fuzz(func(t *testing.T, main, scratch []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "s.jsonl")
		scratchPath := filepath.Join(dir, "s.scratch", "2")
		if err := os.WriteFile(path, main, 0o600); err != nil {
			t.Fatal(err)
		}
		if scratch != nil {
			os.MkdirAll(filepath.Dir(scratchPath), 0o700)
			if err := os.WriteFile(scratchPath, scratch, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		ctx := context.Background()
		s, err := jsonl.Open(ctx, path, jsonl.Options{})
		if err != nil {
			var fe *jsonl.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("open failed with %T %v; want a *jsonl.FileError", err, err)
			}
			if after, _ := os.ReadFile(path); string(after) != string(main) {
				t.Fatal("a failed open changed the main file")
			}
			if scratch != nil {
				if after, _ := os.ReadFile(scratchPath); string(after) != string(scratch) {
					t.Fatal("a failed open changed the scratch file")
				}
			}
			return
		}
		last := s.LastSeq()
		s.Close(ctx)
		r, err := jsonl.Open(ctx, path, jsonl.Options{})
		if err != nil || r.LastSeq() != last || len(r.TornTails()) != 0 {
			t.Fatalf("reopen = %v, lastSeq %d, torn %v; want %d and nothing left to cut", err, r.LastSeq(), r.TornTails(), last)
		}
		r.Close(ctx)
	})
}
