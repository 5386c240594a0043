// Command floor-tcp is the benchmark's TCP (and stdio) floor: a bare gnet
// server reading newline-delimited JSON-RPC and answering the bench workload
// with the least work a correct server can do, on the event loop. With
// -stdio it answers stdin on stdout the same way.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/mcpedge/mcpedge/bench/internal/floor"
	"github.com/panjf2000/gnet/v2"
)

func main() {
	addr := flag.String("tcp", "", "serve on `addr`")
	stdio := flag.Bool("stdio", false, "serve on stdin/stdout")
	flag.Parse()
	if (*addr == "") == !*stdio {
		fmt.Fprintln(os.Stderr, "floor-tcp: give exactly one of -tcp ADDR or -stdio")
		os.Exit(2)
	}
	if *stdio {
		if err := serveStdio(os.Stdin, os.Stdout); err != nil {
			log.Fatal(err)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h := &handler{}
	errc := make(chan error, 1)
	go func() {
		errc <- gnet.Run(h, "tcp://"+*addr, gnet.WithMulticore(true), gnet.WithNumEventLoop(runtime.NumCPU()), gnet.WithTCPNoDelay(gnet.TCPNoDelay))
	}()
	select {
	case err := <-errc:
		if err != nil {
			log.Fatal(err)
		}
	case <-ctx.Done():
		if h.eng.Validate() == nil {
			_ = h.eng.Stop(context.Background())
		}
	}
}

type handler struct {
	gnet.BuiltinEventEngine
	eng gnet.Engine
}

// OnBoot keeps the engine for shutdown.
func (h *handler) OnBoot(eng gnet.Engine) gnet.Action {
	h.eng = eng
	return gnet.None
}

// maxLine bounds a message; a longer line closes the connection.
const maxLine = 4 << 20

type connState struct{ out []byte }

// OnOpen gives the connection its output buffer.
func (h *handler) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	c.SetContext(&connState{out: make([]byte, 0, 4096)})
	return nil, gnet.None
}

// OnTraffic answers every complete line in the inbound buffer with one
// write; a partial line stays buffered for the next read.
func (h *handler) OnTraffic(c gnet.Conn) gnet.Action {
	st := c.Context().(*connState)
	buf, _ := c.Peek(-1)
	out := st.out[:0]
	used := 0
	for {
		i := bytes.IndexByte(buf[used:], '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimSuffix(buf[used:used+i], []byte{'\r'})
		used += i + 1
		if len(line) == 0 {
			continue
		}
		var ok bool
		if out, ok = floor.Answer(out, line); ok {
			out = append(out, '\n')
		}
	}
	_, _ = c.Discard(used)
	if c.InboundBuffered() > maxLine {
		return gnet.Close
	}
	if len(out) > 0 {
		if _, err := c.Write(out); err != nil {
			return gnet.Close
		}
	}
	if cap(out) <= 64<<10 {
		st.out = out[:0]
	}
	return gnet.None
}

// serveStdio answers each line of r on w, flushing when no input is
// waiting.
func serveStdio(r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	var out []byte
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return fmt.Errorf("floor-tcp: line over %d bytes", br.Size())
		}
		if len(line) > 0 && err == nil {
			line = bytes.TrimRight(line, "\r\n")
			if len(line) > 0 {
				var ok bool
				if out, ok = floor.Answer(out[:0], line); ok {
					out = append(out, '\n')
					if _, werr := bw.Write(out); werr != nil {
						return werr
					}
				}
			}
		}
		if err != nil {
			if err == io.EOF {
				return bw.Flush()
			}
			return err
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
}
