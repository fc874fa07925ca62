package core

import "github.com/pico-go/pico/storage"

// allPages reads every page of a cursor-paged read: read gets a cursor with
// the largest page limit and After advanced past the previous page.
func allPages[T any](read func(c storage.Cursor) (storage.Page[T], error)) ([]T, error) {
	var out []T
	c := storage.Cursor{Limit: storage.PageLimitMax}
	for {
		p, err := read(c)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Items...)
		if p.Next == 0 {
			return out, nil
		}
		c.After = p.Next
	}
}
