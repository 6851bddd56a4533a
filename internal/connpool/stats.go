package connpool

import "sync"

// connStats counts the dials by broker address.
type connStats struct {
	mu         sync.Mutex
	seen       map[connKey]struct{}
	reconnects int64
}

// dialed counts a connection dialed to key.
func (s *connStats) dialed(key connKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[connKey]struct{}{}
	}
	if _, ok := s.seen[key]; ok {
		s.reconnects++
		return
	}
	s.seen[key] = struct{}{}
}

// count is the number of reconnects.
func (s *connStats) count() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reconnects
}
