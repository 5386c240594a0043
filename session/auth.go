package session

// SetAuth records the caller that an authorizing layer verified for the
// session (package auth: its *auth.Info), replacing any earlier one. Safe
// for concurrent use.
func (s *Session) SetAuth(v any) {
	if p := s.auth.Load(); p != nil && *p == v {
		return
	}
	s.auth.Store(&v)
}

// Auth returns what SetAuth recorded, or nil.
func (s *Session) Auth() any {
	if p := s.auth.Load(); p != nil {
		return *p
	}
	return nil
}
