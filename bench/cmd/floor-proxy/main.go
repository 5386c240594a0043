// Command floor-proxy is the gateway benchmark's floor for the HTTP hop: a
// bare fasthttp reverse proxy that forwards each POST to one upstream and
// copies its answer back, with no MCP work at all (no parse, no id
// rewrite, no session). Its CPU per call, against the upstream's serving
// the same call directly, is what one more HTTP/1.1 exchange per call
// costs: keep-alive connections, one request and one response each
// (-pipeline 0), or requests pipelined over a few connections
// (fasthttp.PipelineClient, -pipeline N: N connections).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("http", "", "serve on `addr`, endpoint /mcp")
	up := flag.String("upstream", "", "forward to `URL` (http://host:port/path)")
	conns := flag.Int("conns", 512, "keep-alive connections to the upstream (without -pipeline)")
	pipeline := flag.Int("pipeline", 0, "pipeline requests over this many connections (0: one request per connection at a time)")
	flag.Parse()
	u, err := url.Parse(*up)
	if *addr == "" || err != nil || u.Host == "" {
		fmt.Fprintln(os.Stderr, "floor-proxy: give -http ADDR -upstream http://HOST:PORT/PATH")
		os.Exit(2)
	}
	var do func(req *fasthttp.Request, resp *fasthttp.Response) error
	if *pipeline > 0 {
		pc := &fasthttp.PipelineClient{Addr: u.Host, MaxConns: *pipeline, MaxPendingRequests: 4096, ReadTimeout: 30 * time.Second}
		do = pc.Do
	} else {
		hc := &fasthttp.HostClient{Addr: u.Host, MaxConns: *conns, ReadTimeout: 30 * time.Second}
		do = hc.Do
	}
	target := []byte(*up)
	sid := []byte("Mcp-Session-Id")
	handle := func(ctx *fasthttp.RequestCtx) {
		req := fasthttp.AcquireRequest()
		resp := fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURIBytes(target)
		req.Header.SetMethodBytes(ctx.Method())
		req.Header.SetContentTypeBytes(ctx.Request.Header.ContentType())
		req.Header.Set("Accept", "application/json, text/event-stream")
		if v := ctx.Request.Header.PeekBytes(sid); len(v) > 0 {
			req.Header.SetBytesKV(sid, v)
		}
		req.SetBodyRaw(ctx.PostBody())
		if err := do(req, resp); err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
			return
		}
		ctx.SetStatusCode(resp.StatusCode())
		ctx.SetContentTypeBytes(resp.Header.ContentType())
		if v := resp.Header.PeekBytes(sid); len(v) > 0 {
			ctx.Response.Header.SetBytesKV(sid, v)
		}
		ctx.Response.SetBody(resp.Body())
	}
	srv := &fasthttp.Server{Handler: handle, Name: "floor-proxy", NoDefaultDate: true, NoDefaultContentType: true}
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
