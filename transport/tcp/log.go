package tcp

import (
	"fmt"
	"log/slog"
)

// gnetLogger routes gnet's own logs to the server's logger (gnet's default
// writes to standard output). gnet's informational lines (its start-up
// banner) are debug-level here.
type gnetLogger struct{ log *slog.Logger }

func (l gnetLogger) Debugf(format string, args ...any) { l.log.Debug(fmt.Sprintf(format, args...)) }
func (l gnetLogger) Infof(format string, args ...any)  { l.log.Debug(fmt.Sprintf(format, args...)) }
func (l gnetLogger) Warnf(format string, args ...any)  { l.log.Warn(fmt.Sprintf(format, args...)) }
func (l gnetLogger) Errorf(format string, args ...any) { l.log.Error(fmt.Sprintf(format, args...)) }
func (l gnetLogger) Fatalf(format string, args ...any) { l.log.Error(fmt.Sprintf(format, args...)) }
