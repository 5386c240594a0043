package gateway

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readBody reads a body framed as contentLength says (fasthttp's
// convention: -1 chunked, -2 until close) from in, and what follows it.
func readBody(in string, contentLength int) (body, rest string, err error) {
	br := bufio.NewReaderSize(strings.NewReader(in), 16)
	b := h1Body{br: br}
	b.reset(contentLength)
	out, err := io.ReadAll(&b)
	if err != nil {
		return string(out), "", err
	}
	tail, _ := io.ReadAll(br)
	return string(out), string(tail), nil
}

func TestH1Body(t *testing.T) {
	for _, tt := range []struct {
		name, in   string
		length     int
		body, rest string
		err        error
	}{
		{"length", "hello worldNEXT", 11, "hello world", "NEXT", nil},
		{"empty length", "NEXT", 0, "", "NEXT", nil},
		{"short length", "hel", 5, "hel", "", io.ErrUnexpectedEOF},
		{"chunked", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nNEXT", -1, "hello world", "NEXT", nil},
		{"chunked upper hex and extension", "A;ext=1\r\n0123456789\r\n0\r\n\r\n", -1, "0123456789", "", nil},
		{"chunked bare LF", "3\nabc\n0\n\nNEXT", -1, "abc", "NEXT", nil},
		{"chunked trailers", "3\r\nabc\r\n0\r\nX-Trailer: 1\r\nY: 2\r\n\r\nNEXT", -1, "abc", "NEXT", nil},
		{"chunked spans the buffer", "20\r\n" + strings.Repeat("x", 32) + "\r\n0\r\n\r\n", -1, strings.Repeat("x", 32), "", nil},
		{"chunked bad hex", "zz\r\nabc\r\n0\r\n\r\n", -1, "", "", errChunk},
		{"chunked no digits", ";x\r\nabc\r\n", -1, "", "", errChunk},
		{"chunked size too long", "1000000000000000\r\n", -1, "", "", errChunk},
		{"chunked data not ended by CRLF", "3\r\nabcX\r\n0\r\n\r\n", -1, "abc", "", errChunk},
		{"chunked cut", "5\r\nhel", -1, "hel", "", io.ErrUnexpectedEOF},
		{"chunked no last chunk", "3\r\nabc\r\n", -1, "abc", "", io.ErrUnexpectedEOF},
		{"chunked line over the buffer", strings.Repeat("1", 40) + "\r\n", -1, "", "", errChunk},
		{"until close", "everything", -2, "everything", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body, rest, err := readBody(tt.in, tt.length)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				assert.Equal(t, tt.body, body)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.body, body)
			assert.Equal(t, tt.rest, rest)
		})
	}
}

// TestH1BodyDiscard: discard drops what is left of a body, up to a
// bound past which the connection is not reused.
func TestH1BodyDiscard(t *testing.T) {
	br := bufio.NewReader(strings.NewReader("3\r\nabc\r\n0\r\n\r\nNEXT"))
	b := h1Body{br: br}
	b.reset(-1)
	require.NoError(t, b.discard(100))
	assert.True(t, b.done)
	tail, _ := io.ReadAll(br)
	assert.Equal(t, "NEXT", string(tail))

	b = h1Body{br: bufio.NewReader(strings.NewReader(strings.Repeat("x", 1000)))}
	b.reset(1000)
	assert.ErrorIs(t, b.discard(100), codec.ErrTooLarge)
}

// FuzzH1Body: any bytes, read as a chunked body, end in a body no longer
// than the input or an error; never a panic or a loop.
func FuzzH1Body(f *testing.F) {
	for _, s := range []string{"5\r\nhello\r\n0\r\n\r\n", "A;x\r\n0123456789\r\n0\r\nT: 1\r\n\r\n", "3\nabc\n0\n\n", "zz\r\n", "0\r\n\r\n", "\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(in), 16)
		b := h1Body{br: br}
		b.reset(-1)
		out, err := io.ReadAll(io.LimitReader(&b, int64(len(in))+1))
		if len(out) > len(in) {
			t.Fatalf("%d bytes out of %d in", len(out), len(in))
		}
		if err == nil && !b.done {
			t.Fatalf("a body that ended without its last chunk: %q", in)
		}
	})
}
