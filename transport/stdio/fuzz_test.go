package stdio_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/transport/stdio"
)

// chunkReader returns data in reads that end at the given split points, so
// that frames arrive cut anywhere.
type chunkReader struct {
	data   []byte
	splits []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.splits) > 0 {
		n = 1 + int(r.splits[0])%len(r.data)
		r.splits = r.splits[1:]
	}
	n = min(n, len(p))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// FuzzServe feeds a byte stream, split at arbitrary points, through a whole
// stdio session: it must end without a panic (recovered ones included) and
// write only newline-framed JSON. Seeded with the recorded traffic of the
// conformance and interop runs (engine/testdata/traffic.jsonl) as one stream.
func FuzzServe(f *testing.F) {
	traffic, err := os.ReadFile("../../engine/testdata/traffic.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	f.Add([]byte(init+string(traffic)), []byte{7, 200, 3, 90})
	f.Add([]byte(init+"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/get\",\"params\":{\"name\":\"greet\",\"arguments\":{\"name\":\"a\xffb\"}}}\n"), []byte{1, 1, 1})
	f.Add([]byte(init+"{\"jsonrpc\":\"2.0\",\"id\":1,\"meth"), []byte{})

	srv := engine.New(engine.Options{ClientRequestTimeout: 50 * time.Millisecond, MaxMessage: 1 << 16, BigMessage: 1 << 10})
	for _, set := range []string{"conformance", "demo"} {
		if err := builtin.Install(set, srv.Registry(), builtin.Env{ResourceUpdated: srv.ResourceUpdated}); err != nil {
			f.Fatal(err)
		}
	}
	f.Cleanup(func() { _ = srv.Shutdown(context.Background()) })

	f.Fuzz(func(t *testing.T, stream, splits []byte) {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stdio.Serve(ctx, srv, &chunkReader{data: stream, splits: splits}, &out, stdio.Options{DrainTimeout: time.Second})
		if n := srv.Panics(); n != 0 {
			t.Fatalf("%d panic(s) recovered (see the log)", n)
		}
		sc := bufio.NewScanner(&out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !json.Valid(sc.Bytes()) {
				t.Fatalf("wrote a line that is not JSON: %q", sc.Bytes())
			}
		}
	})
}
