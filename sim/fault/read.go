package fault

import (
	"context"

	"github.com/pico-go/pico/storage"
)

// Reads pass through to the inner store: a held commit has not reached it,
// so they see the previous complete state. On a dead or closed handle they
// fail like every other call.

func (s *Storage) GetConversations(ctx context.Context, ids []storage.ID) (map[storage.ID]storage.Conversation, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	return s.inner.GetConversations(ctx, ids)
}

func (s *Storage) ScanConversations(ctx context.Context, q storage.ConversationQuery) (storage.Page[storage.Conversation], error) {
	if err := s.usable(); err != nil {
		return storage.Page[storage.Conversation]{}, err
	}
	return s.inner.ScanConversations(ctx, q)
}

func (s *Storage) GetEntries(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Entry, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	return s.inner.GetEntries(ctx, ids)
}

func (s *Storage) ScanEntries(ctx context.Context, q storage.EntryQuery) (storage.Page[*storage.Entry], error) {
	if err := s.usable(); err != nil {
		return storage.Page[*storage.Entry]{}, err
	}
	return s.inner.ScanEntries(ctx, q)
}

func (s *Storage) NewestHead(ctx context.Context, conversationID, at storage.ID) (*storage.Entry, bool, error) {
	if err := s.usable(); err != nil {
		return nil, false, err
	}
	return s.inner.NewestHead(ctx, conversationID, at)
}

func (s *Storage) EntryKinds(ctx context.Context) ([]string, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	return s.inner.EntryKinds(ctx)
}

func (s *Storage) GetTasks(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Task, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	return s.inner.GetTasks(ctx, ids)
}

func (s *Storage) ScanTasks(ctx context.Context, q storage.TaskQuery) (storage.Page[*storage.Task], error) {
	if err := s.usable(); err != nil {
		return storage.Page[*storage.Task]{}, err
	}
	return s.inner.ScanTasks(ctx, q)
}

func (s *Storage) GetValue(ctx context.Context, addr storage.Address, at storage.ID) (storage.Version, bool, error) {
	if err := s.usable(); err != nil {
		return storage.Version{}, false, err
	}
	return s.inner.GetValue(ctx, addr, at)
}

func (s *Storage) ScanValues(ctx context.Context, q storage.ValueQuery) (storage.Page[storage.KeyedVersion], error) {
	if err := s.usable(); err != nil {
		return storage.Page[storage.KeyedVersion]{}, err
	}
	return s.inner.ScanValues(ctx, q)
}

func (s *Storage) ReadList(ctx context.Context, addr storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	if err := s.usable(); err != nil {
		return storage.Page[storage.Element]{}, err
	}
	return s.inner.ReadList(ctx, addr, q)
}
