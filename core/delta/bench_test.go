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
