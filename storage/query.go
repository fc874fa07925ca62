package storage

import (
	"math"
	"slices"
)

// Page is one page of a scan, in ascending id (or key) order. Next is the
// cursor that continues the scan in the direction it was read (pass it as
// After for a forward scan, as Before for a backward one); zero when there is
// nothing more. ReadAt is the session sequence the page was read at.
type Page[T any] struct {
	Items  []T `json:"items"`
	Next   ID  `json:"next,omitempty"`
	ReadAt ID  `json:"readAt"`
}

// Cursor bounds a scan. After and Before are exclusive ids. With only Before
// set the scan reads backward: the Limit items immediately before it, still
// returned in ascending order. Limit is at most PageLimitMax; zero (so also
// the zero Cursor) means PageLimitDefault.
type Cursor struct {
	After  ID  `json:"after,omitempty"`
	Before ID  `json:"before,omitempty"`
	Limit  int `json:"limit"`
}

// PageLimitMax bounds every scan's page size; PageLimitDefault is the size
// of a page whose cursor names none.
const (
	PageLimitMax     = 10_000
	PageLimitDefault = 100
)

// Defaulted is the cursor a scan runs with: PageLimitDefault for a zero
// Limit, the cursor as given otherwise. Every backend applies it before
// CheckCursor.
func (c Cursor) Defaulted() Cursor {
	if c.Limit == 0 {
		c.Limit = PageLimitDefault
	}
	return c
}

// Backward reports whether the cursor reads backward from Before.
func (c Cursor) Backward() bool { return c.Before != 0 && c.After == 0 }

// ConversationQuery scans conversations. Parent selects forks of a
// conversation; OwnedFrom selects conversations owned by tasks of a
// conversation. Deleted conversations never appear.
type ConversationQuery struct {
	Cursor
	Parent    ID `json:"parent,omitempty"`
	OwnedFrom ID `json:"ownedFrom,omitempty"`
}

// EntryQuery scans the logical (fork-aware) transcript of a conversation.
// Kind and Key filter; From and Through are an inclusive id range.
type EntryQuery struct {
	Cursor
	ConversationID ID     `json:"conversationId"`
	Kind           string `json:"kind,omitempty"`
	Key            string `json:"key,omitempty"`
	From           ID     `json:"from,omitempty"`
	Through        ID     `json:"through,omitempty"`
}

// TaskQuery scans tasks. Without ConversationIDs it covers the session. Live
// true selects non-terminal tasks through the live index (terminal rows are
// never visited); Live false selects terminal ones.
type TaskQuery struct {
	Cursor
	ConversationIDs []ID     `json:"conversationIds,omitempty"`
	Live            *bool    `json:"live,omitempty"`
	Role            TaskRole `json:"role,omitempty"`
	Kind            string   `json:"kind,omitempty"`
	Abort           *bool    `json:"abort,omitempty"`
}

// ListQuery reads a list. At, when set, is an entry id: the list as it was at
// that position (rewindable conversation lists only).
type ListQuery struct {
	Cursor
	At ID `json:"at,omitempty"`
}

// ValueQuery scans the current values of one namespace in one scope, ordered
// by key, starting after the key After.
type ValueQuery struct {
	Scope     Scope  `json:"scope"`
	Namespace string `json:"namespace"`
	After     string `json:"after,omitempty"`
	Limit     int    `json:"limit"`
}

// Bool returns a pointer to v, for the optional query flags.
func Bool(v bool) *bool { return &v }

// Bounds turns the cursor plus an optional inclusive range (0 = open) into
// the inclusive id interval [lo, hi] a scan must cover.
func (c Cursor) Bounds(from, through ID) (lo, hi ID) {
	lo, hi = 1, ID(math.MaxInt64)
	if from > 0 {
		lo = from
	}
	if through > 0 {
		hi = through
	}
	if c.After > 0 {
		lo = max(lo, c.After+1)
	}
	if c.Before > 0 {
		hi = min(hi, c.Before-1)
	}
	return lo, hi
}

// NewPage builds a page from up to Limit+1 items collected in scan order
// (descending for a backward cursor): one item past the limit means more
// remain. Items end up ascending, never nil, and Next continues the scan in
// its direction.
func NewPage[T any](c Cursor, readAt ID, items []T, idOf func(T) ID) Page[T] {
	more := len(items) > c.Limit
	if more {
		items = items[:c.Limit]
	}
	if items == nil {
		items = []T{}
	}
	p := Page[T]{ReadAt: readAt}
	if c.Backward() {
		slices.Reverse(items)
		if more && len(items) > 0 {
			p.Next = idOf(items[0])
		}
	} else if more && len(items) > 0 {
		p.Next = idOf(items[len(items)-1])
	}
	p.Items = items
	return p
}
