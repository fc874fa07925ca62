package storage

import (
	"testing"

	"pgregory.net/rapid"
)

// TestBatchMapIsAMap holds batchMap to a Go map over random sets, gets,
// deletes and resets (a pooled checker's next batch), with enough keys to
// cross from pairs to a map and back to reads of both forms.
func TestBatchMapIsAMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var b batchMap[int, int]
		want := map[int]int{}
		key := rapid.IntRange(0, 3*batchMapPairsMax)
		for i, n := 0, rapid.IntRange(1, 8*batchMapPairsMax).Draw(rt, "ops"); i < n; i++ {
			switch op := rapid.IntRange(0, 10).Draw(rt, "op"); {
			case op < 6:
				k, v := key.Draw(rt, "k"), rapid.Int().Draw(rt, "v")
				b.set(k, v)
				want[k] = v
			case op < 9:
				k := key.Draw(rt, "k")
				got, ok := b.get(k)
				w, wok := want[k]
				if got != w || ok != wok {
					rt.Fatalf("get(%d) = %d, %v; want %d, %v", k, got, ok, w, wok)
				}
			case op == 10:
				b.reset()
				clear(want)
			default:
				mod := rapid.IntRange(2, 5).Draw(rt, "mod")
				drop := func(k int) bool { return k%mod == 0 }
				b.deleteFunc(drop)
				for k := range want {
					if drop(k) {
						delete(want, k)
					}
				}
			}
		}
		for k := range 3*batchMapPairsMax + 1 {
			got, ok := b.get(k)
			if w, wok := want[k]; got != w || ok != wok {
				rt.Fatalf("at the end get(%d) = %d, %v; want %d, %v", k, got, ok, w, wok)
			}
		}
	})
}

// TestBatchMapBecomesAMap checks the bound: pairs up to batchMapPairsMax,
// a map after.
func TestBatchMapBecomesAMap(t *testing.T) {
	var b batchMap[int, bool]
	for k := range batchMapPairsMax {
		b.set(k, true)
		b.set(k, true) // a key set again takes no second pair
	}
	if b.m != nil || len(b.pairs) != batchMapPairsMax {
		t.Fatalf("after %d keys: %d pairs, map %v; want %d pairs and no map", batchMapPairsMax, len(b.pairs), b.m != nil, batchMapPairsMax)
	}
	b.set(batchMapPairsMax, true)
	if b.m == nil || len(b.pairs) != 0 || len(b.m) != batchMapPairsMax+1 {
		t.Fatalf("after %d keys: %d pairs, map of %d; want a map of them all", batchMapPairsMax+1, len(b.pairs), len(b.m))
	}
}
