package engine

// Instructions returns the instructions the server sends in its
// initialize and server/discover results: what SetInstructions set last,
// else Options.Instructions.
func (s *Server) Instructions() string {
	if p := s.instructions.Load(); p != nil {
		return *p
	}
	return s.opts.Instructions
}

// SetInstructions replaces the instructions sent from now on (a gateway
// merges its upstreams' into its own as they connect). Clients already
// initialized are not told: instructions have no change notification.
// Safe for concurrent use.
func (s *Server) SetInstructions(text string) {
	s.instructions.Store(&text)
}
