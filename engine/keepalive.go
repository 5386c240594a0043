package engine

import (
	"context"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// ErrKeepAlive is the cause of a session closed for missing pings.
var ErrKeepAlive = codec.ReasonKeepAlive.Err("engine: session missed keep-alive pings")

// keepAlive pings every initialized session each KeepAlive interval; a
// session that misses KeepAliveMisses pings in a row is closed. At most one
// ping per session is outstanding.
func (s *Server) keepAlive() {
	t := time.NewTicker(s.opts.KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.sessions.Range(func(sess *session.Session) bool {
			if sess.Initialized() && sess.Out != nil && sess.BeginPing() {
				go s.ping(sess)
			}
			return true
		})
	}
}

func (s *Server) ping(sess *session.Session) {
	ctx, cancel := context.WithTimeout(sess.Context(), s.opts.KeepAlive)
	defer cancel()
	_, err := s.CallClient(ctx, sess, nil, mcp.MethodPing, nil)
	if misses := sess.EndPing(err == nil); misses >= s.opts.KeepAliveMisses {
		s.log.Info("closing unresponsive session", "session", sess.ID(), "missed", misses)
		s.closeSession(sess, ErrKeepAlive)
	}
}
