package jsonl_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pico-go/pico/storage/jsonl"
)

// FuzzReplay opens arbitrary bytes as a session's main file. Open must not
// panic; it either fails with a *FileError or yields a session that reopens
// to the same sequence, having cut at most a torn final line.
func FuzzReplay(f *testing.F) {
	f.Add([]byte(`{"first":1,"writes":[{"type":"createConversation","conversation":{"id":1}}]}` + "\n"))
	f.Add([]byte(`{"first":1,"writes":[{"type":"createConversation","conversation":{"id":1}}]}` + "\n" +
		`{"first":2,"writes":[{"type":"entry","entry":{"id":2,"conversationId":1,"kind":"user","head":2}}]}` + "\n"))
	f.Add([]byte(`{"first":1,"writes":[{"type":"createConversation","conversation":{"id":1}}]}` + "\n" + `{"first":2,"wri`))
	f.Add([]byte("{oops}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		s, err := jsonl.Open(ctx, path, jsonl.Options{})
		if err != nil {
			var fe *jsonl.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("open failed with %T %v; want a *jsonl.FileError", err, err)
			}
			return
		}
		last := s.LastSeq()
		s.Close(ctx)
		r, err := jsonl.Open(ctx, path, jsonl.Options{})
		if err != nil || r.LastSeq() != last {
			t.Fatalf("reopen = %v, lastSeq %d; want %d", err, r.LastSeq(), last)
		}
		r.Close(ctx)
	})
}
