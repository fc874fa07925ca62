package storage_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/pico-go/pico/storage"
)

func TestAllPagesFollowsNextUntilTheLastPage(t *testing.T) {
	var cursors []storage.Cursor
	pages := map[storage.ID]storage.Page[int]{
		0: {Items: []int{1, 2}, Next: 2},
		2: {Items: []int{3}, Next: 3},
		3: {Items: []int{4}},
	}
	got, err := storage.AllPages(func(c storage.Cursor) (storage.Page[int], error) {
		cursors = append(cursors, c)
		return pages[c.After], nil
	})
	if err != nil || !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Fatalf("AllPages = %v, %v; want 1 2 3 4", got, err)
	}
	for i, c := range cursors {
		if c.Limit != storage.PageLimitMax {
			t.Fatalf("page %d read with limit %d; want PageLimitMax", i, c.Limit)
		}
	}
	if len(cursors) != 3 || cursors[1].After != 2 || cursors[2].After != 3 {
		t.Fatalf("cursors = %+v; want After 0, 2, 3", cursors)
	}
	boom := errors.New("boom")
	if _, err := storage.AllPages(func(storage.Cursor) (storage.Page[int], error) { return storage.Page[int]{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("a failing read = %v; want its error", err)
	}
}
