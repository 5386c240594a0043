package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// signals returns a context that ends at the first SIGTERM or SIGINT: the
// server then drains (mcpedge.Server.Shutdown) within -drain. SIGHUP does
// not end the process: onHUP is called for each one (configuration
// reload hooks in here); nil logs that it is ignored. stop releases the
// signals.
func signals(log *slog.Logger, onHUP func()) (ctx context.Context, stop func()) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				if onHUP != nil {
					onHUP()
				} else {
					log.Info("SIGHUP ignored: nothing to reload")
				}
			}
		}
	}()
	return ctx, func() {
		signal.Stop(hup)
		close(done)
		cancel()
	}
}
