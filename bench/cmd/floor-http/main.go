// Command floor-http is the benchmark's HTTP floor: a bare fasthttp server
// that answers the bench workload POSTed to /mcp as JSON with the least work
// a correct server can do. It keeps no sessions: initialize is answered
// with a fresh Mcp-Session-Id that later requests may carry or not.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcpedge/mcpedge/bench/internal/floor"
	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("http", "", "serve on `addr`, endpoint /mcp")
	flag.Parse()
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "floor-http: give -http ADDR")
		os.Exit(2)
	}
	srv := &fasthttp.Server{Handler: handle, Name: "floor", NoDefaultDate: true, NoDefaultContentType: true}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe(*addr) }()
	select {
	case err := <-errc:
		log.Fatal(err)
	case <-ctx.Done():
		_ = srv.Shutdown()
	}
}

func handle(ctx *fasthttp.RequestCtx) {
	if string(ctx.Path()) != "/mcp" {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		return
	}
	if !ctx.IsPost() {
		ctx.SetStatusCode(fasthttp.StatusMethodNotAllowed)
		return
	}
	body := ctx.PostBody()
	out, ok := floor.Answer(ctx.Response.Body()[:0], body)
	if !ok {
		ctx.SetStatusCode(fasthttp.StatusAccepted)
		return
	}
	if len(ctx.Request.Header.Peek("Mcp-Session-Id")) == 0 {
		var id [16]byte
		_, _ = rand.Read(id[:])
		ctx.Response.Header.Set("Mcp-Session-Id", hex.EncodeToString(id[:]))
	}
	ctx.SetContentType("application/json")
	ctx.Response.SetBodyRaw(out)
}
