package storage

import (
	"context"
)

// Storage persists one session. Point reads, batched reads, bounded indexed
// scans and one atomic Commit; nothing about tasks, kinds or context.
//
// Commit is called by one writer at a time (the harness's commit line); reads
// may run concurrently with each other but not with a Commit. A Commit either
// persists the whole batch or nothing and returns an error.
type Storage interface {
	// LastSeq is the last committed sequence.
	LastSeq() ID
	// Commit persists one batch; write i gets LastSeq()+1+i. An empty batch
	// writes nothing and returns Range{First: LastSeq()+1, Last: LastSeq()}.
	// The backend takes ownership of the batch and the records in it: the
	// caller must not modify them afterwards (the memory backend shares them
	// with readers).
	Commit(ctx context.Context, batch CommitBatch) (Range, error)

	// GetConversations returns the named conversations that exist and are not
	// deleted; missing ids are absent from the map.
	GetConversations(ctx context.Context, ids []ID) (map[ID]Conversation, error)
	ScanConversations(ctx context.Context, q ConversationQuery) (Page[Conversation], error)

	// GetEntries returns full entries by id, from any conversation.
	GetEntries(ctx context.Context, ids []ID) (map[ID]*Entry, error)
	// ScanEntries reads the fork-aware logical transcript of a conversation.
	ScanEntries(ctx context.Context, q EntryQuery) (Page[*Entry], error)
	// NewestHead returns the newest entry with a head that is visible in the
	// conversation's logical transcript at or before at (0 = now).
	NewestHead(ctx context.Context, conversationID, at ID) (*Entry, bool, error)
	// EntryKinds returns the distinct entry kind strings ever written, sorted.
	EntryKinds(ctx context.Context) ([]string, error)

	// GetTasks returns the named tasks, terminal ones included.
	GetTasks(ctx context.Context, ids []ID) (map[ID]*Task, error)
	ScanTasks(ctx context.Context, q TaskQuery) (Page[*Task], error)

	// GetValue reads a value: current when at is 0, else as of entry at
	// (rewindable conversation values only; forks read their source capped at
	// the fork point).
	GetValue(ctx context.Context, addr Address, at ID) (Version, bool, error)
	// ScanValues pages through the current keyed values of a namespace, by
	// key (the namespace's keyless value is a point read). Keys are not ids:
	// to continue, pass the last item's key as After; Next is non-zero when
	// more remain.
	ScanValues(ctx context.Context, q ValueQuery) (Page[KeyedVersion], error)
	ReadList(ctx context.Context, addr Address, q ListQuery) (Page[Element], error)

	// Close releases the backend. Later calls fail with ErrClosed.
	Close(ctx context.Context) error
}

// Claimer is a store that admits one harness at a time. A harness claims
// its store when it opens and releases it when it closes; a second claim
// while the first holds fails with a *LockedError. The backends implement
// it (the durable ones also lock their files against other handles and
// processes); a wrapper that does not simply goes unclaimed.
type Claimer interface {
	Claim() (release func(), err error)
}
