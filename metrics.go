package mcpedge

// EventStoreBytes returns the bytes the Streamable HTTP sessions' event
// stores retain for resumption (0 without HTTP). It walks the sessions:
// for metrics scrapes, not per request.
func (s *Server) EventStoreBytes() int64 {
	if s.http == nil {
		return 0
	}
	return s.http.EventStoreBytes()
}
