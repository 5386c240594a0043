package mcpedge

import "github.com/mcpedge/mcpedge/transport/netlimit"

// EventStoreBytes returns the bytes the Streamable HTTP sessions' event
// stores retain for resumption (0 without HTTP). It walks the sessions:
// for metrics scrapes, not per request.
func (s *Server) EventStoreBytes() int64 {
	var n int64
	for _, l := range s.listeners {
		if es, ok := l.Transport.(interface{ EventStoreBytes() int64 }); ok {
			n += es.EventStoreBytes()
		}
	}
	return n
}

// Budgets returns the byte budgets of the network transports: the partial
// inbound bytes (-max-buffered) and the bytes queued for clients
// (-max-outbound-total), each once however many transports share it. Read
// Total for the bytes held now.
func (s *Server) Budgets() (buffered, outbound []*netlimit.Budget) {
	add := func(list []*netlimit.Budget, b *netlimit.Budget) []*netlimit.Budget {
		for _, x := range list {
			if x == b {
				return list
			}
		}
		return append(list, b)
	}
	for _, l := range s.listeners {
		in, out := l.Budgets()
		buffered, outbound = add(buffered, in), add(outbound, out)
	}
	return buffered, outbound
}

// BufferedBytes returns the partial inbound bytes the network transports
// hold (TCP messages, HTTP request bodies being received).
func (s *Server) BufferedBytes() int64 {
	in, _ := s.Budgets()
	return total(in)
}

// OutboundBytes returns the bytes the network transports hold queued for
// clients (TCP answers, SSE streams, large HTTP answers being written).
func (s *Server) OutboundBytes() int64 {
	_, out := s.Budgets()
	return total(out)
}

func total(bs []*netlimit.Budget) int64 {
	var n int64
	for _, b := range bs {
		n += b.Total()
	}
	return n
}
