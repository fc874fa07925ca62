package storage

// AllPages reads every page of a forward, cursor-paged read and returns the
// items in order: read gets a cursor with the largest page limit, and each
// later call's After is the previous page's Next. It is the one loop every
// caller that needs a whole scan (a list, a conversation's tasks) uses.
func AllPages[T any](read func(c Cursor) (Page[T], error)) ([]T, error) {
	var out []T
	c := Cursor{Limit: PageLimitMax}
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
