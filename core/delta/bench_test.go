package delta_test

import (
	"testing"

	"github.com/pico-go/pico/core/delta"
)

// BenchmarkTrackerStreamTokens streams a 200 KB answer in 4-byte tokens,
// flushing every 16 tokens, as a generation's preview does.
func BenchmarkTrackerStreamTokens(b *testing.B) {
	const tokens = 50_000
	b.ReportAllocs()
	for b.Loop() {
		tr := delta.NewTracker(val(b, `{"operation":{"message":{"content":[{"type":"text","text":""}]}}}`))
		tr.Flush()
		for i := range tokens {
			if err := tr.AppendString(textPath, "tok "); err != nil {
				b.Fatal(err)
			}
			if i%16 == 15 {
				tr.Flush()
			}
		}
	}
}

// BenchmarkApplyAppend applies one a op per flush to a replica.
func BenchmarkApplyAppend(b *testing.B) {
	ops := []delta.Op{delta.Append(textPath, "tok tok tok tok ")}
	b.ReportAllocs()
	for b.Loop() {
		replica := val(b, `{"operation":{"message":{"content":[{"type":"text","text":""}]}}}`)
		for range 3_000 {
			var err error
			if replica, err = delta.ApplyImmutable(replica, ops); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkParseValue decodes a streamed assistant message's preview (a
// text block and a tool call with arguments, usage numbers, an escaped
// string) with ParseValue and, for the ratio, with encoding/json as
// ParseValue did before it had its own decoder.
func BenchmarkParseValue(b *testing.B) {
	msg := []byte(`{"role":"assistant","content":[{"type":"text","text":"Here is the plan:\n1. read \"main.go\"\n2. run the tests"},` +
		`{"type":"toolCall","id":"call_1","name":"bash","arguments":{"command":"go test ./...","timeoutMs":120000}}],` +
		`"api":"faux","provider":"faux","model":"faux-1","usage":{"input":10000,"output":42,"cacheRead":0,"cacheWrite":0,"totalTokens":10042,` +
		`"cost":{"input":0.03,"output":0.0063,"cacheRead":0,"cacheWrite":0,"total":0.0363}},"stopReason":"toolUse","timestamp":1796183294639}`)
	b.Run("delta", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := delta.ParseValue(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodeLikeEncodingJSON(msg); !ok {
				b.Fatal("refused")
			}
		}
	})
}
