package tcp

import (
	"fmt"
	"log/slog"
)

// gnetLogger routes gnet's own logs to the server's logger (gnet's default
// writes to standard output), all at debug level and marked
// component=gnet: its start-up banner, its event loops exiting, and its
// warnings and errors, whose consequences the transport reports itself
// (a connection closed with its reason, Serve's error). Only a fatal
// line keeps its level.
type gnetLogger struct{ log *slog.Logger }

func (l gnetLogger) debug(format string, args []any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "gnet")
}

func (l gnetLogger) Debugf(format string, args ...any) { l.debug(format, args) }
func (l gnetLogger) Infof(format string, args ...any)  { l.debug(format, args) }
func (l gnetLogger) Warnf(format string, args ...any)  { l.debug(format, args) }
func (l gnetLogger) Errorf(format string, args ...any) { l.debug(format, args) }
func (l gnetLogger) Fatalf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "gnet")
}
