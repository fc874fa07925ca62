package storage

import "github.com/pico-go/pico/internal/plant"

// batchMap is a map for what one batch touches: its pairs in a slice,
// searched in order, until it holds batchMapPairsMax of them and becomes a
// Go map. A batch writes a handful of records; the checker's maps, made
// anew for every batch, cost more than the checks they served.
type batchMap[K comparable, V any] struct {
	pairs []batchPair[K, V]
	m     map[K]V
}

type batchPair[K comparable, V any] struct {
	k K
	v V
}

// batchMapPairsMax is how many pairs a batchMap searches in order before
// it becomes a map.
const batchMapPairsMax = 16

func (b *batchMap[K, V]) get(k K) (V, bool) {
	if b.m != nil {
		v, ok := b.m[k]
		return v, ok
	}
	for i := range b.pairs {
		if b.pairs[i].k == k {
			return b.pairs[i].v, true
		}
	}
	var zero V
	return zero, false
}

func (b *batchMap[K, V]) set(k K, v V) {
	if b.m != nil {
		b.m[k] = v
		return
	}
	for i := range b.pairs {
		if b.pairs[i].k == k {
			b.pairs[i].v = v
			return
		}
	}
	if len(b.pairs) < batchMapPairsMax {
		b.pairs = append(b.pairs, batchPair[K, V]{k, v})
		return
	}
	b.m = make(map[K]V, 2*batchMapPairsMax)
	for _, p := range b.pairs {
		if plant.On("batch-map-spill-keeps-newest") {
			break
		}
		b.m[p.k] = p.v
	}
	b.pairs = nil
	b.m[k] = v
}

// deleteFunc removes every pair whose key drop reports.
func (b *batchMap[K, V]) deleteFunc(drop func(K) bool) {
	if b.m != nil {
		for k := range b.m {
			if drop(k) {
				delete(b.m, k)
			}
		}
		return
	}
	kept := b.pairs[:0]
	for _, p := range b.pairs {
		if !drop(p.k) {
			kept = append(kept, p)
		}
	}
	clear(b.pairs[len(kept):])
	b.pairs = kept
}

// reset empties b for another batch, keeping the room its pairs had.
func (b *batchMap[K, V]) reset() {
	clear(b.pairs)
	b.pairs, b.m = b.pairs[:0], nil
}
