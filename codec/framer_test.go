package codec

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// framed is what a stream yields when fed to a framer.
type framed struct {
	frames []string
	rest   string // bytes left unconsumed; only meaningful when err is nil
	err    error
}

// feedFramer feeds chunks to f one after the other, as reads from a
// connection would arrive, and collects every frame.
func feedFramer(t testing.TB, f Framer, chunks ...[]byte) framed {
	var out framed
	var buf []byte
	for _, c := range chunks {
		buf = append(buf, c...)
		for {
			frame, n, err := f.Next(buf)
			if err != nil {
				out.err = err
				return out
			}
			if n == 0 {
				require.Nil(t, frame, "no frame without consumed bytes")
				break
			}
			require.LessOrEqual(t, n, len(buf))
			require.True(t, len(frame) == 0 || aliases(frame, buf[:n]), "frame lies within the consumed bytes")
			out.frames = append(out.frames, string(frame))
			buf = buf[n:]
		}
	}
	out.rest = string(buf)
	return out
}

// splitAt cuts data into chunks whose lengths the cuts bytes give (a zero
// gives an empty read); what is left forms the last chunk.
func splitAt(data, cuts []byte) [][]byte {
	var chunks [][]byte
	for _, c := range cuts {
		n := min(int(c), len(data))
		chunks = append(chunks, data[:n])
		data = data[n:]
	}
	return append(chunks, data)
}

// bytewise cuts s into one-byte chunks.
func bytewise(s string) [][]byte {
	chunks := make([][]byte, len(s))
	for i := range chunks {
		chunks[i] = []byte(s[i : i+1])
	}
	return chunks
}

func TestNewlineFramer(t *testing.T) {
	tests := []struct {
		name string
		max  int
		in   string
		want framed
	}{
		{"one", 0, "{\"a\":1}\n", framed{frames: []string{`{"a":1}`}}},
		{"many in one buffer", 0, "a\nb\nc\n", framed{frames: []string{"a", "b", "c"}}},
		{"crlf", 0, "a\r\nb\r\n", framed{frames: []string{"a", "b"}}},
		{"only one cr stripped", 0, "a\r\r\n", framed{frames: []string{"a\r"}}},
		{"cr inside kept", 0, "a\rb\n", framed{frames: []string{"a\rb"}}},
		{"blank lines", 0, "\n\r\na\n\n", framed{frames: []string{"", "", "a", ""}}},
		{"partial tail", 0, "a\nbc", framed{frames: []string{"a"}, rest: "bc"}},
		{"partial crlf", 0, "a\r", framed{rest: "a\r"}},
		{"empty", 0, "", framed{}},
		{"at limit", 4, "1234\n", framed{frames: []string{"1234"}}},
		{"at limit crlf", 4, "1234\r\n", framed{frames: []string{"1234"}}},
		{"at limit no newline yet", 4, "1234", framed{rest: "1234"}},
		{"at limit cr no newline yet", 4, "1234\r", framed{rest: "1234\r"}},
		{"over limit", 4, "12345\n", framed{err: ErrTooLarge}},
		{"over limit after good frame", 4, "ok\n12345\n", framed{frames: []string{"ok"}, err: ErrTooLarge}},
		{"over limit no newline yet", 4, "12345", framed{err: ErrTooLarge}},
		{"over limit cr", 4, "1234\r\r\n", framed{err: ErrTooLarge}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewlineFramer{MaxSize: tt.max}
			assert.Equal(t, tt.want, feedFramer(t, f, []byte(tt.in)), "whole")
			assert.Equal(t, tt.want, feedFramer(t, f, bytewise(tt.in)...), "byte by byte")
		})
	}
}

func TestNewlineFramerDefaultLimit(t *testing.T) {
	var f NewlineFramer
	huge := bytes.Repeat([]byte("x"), DefaultMaxMessage+1)
	_, n, err := f.Next(huge)
	assert.ErrorIs(t, err, ErrTooLarge, "a huge line is refused before its newline arrives")
	assert.Zero(t, n)

	frame, n, err := f.Next(append(huge[:DefaultMaxMessage:DefaultMaxMessage], '\n'))
	require.NoError(t, err)
	assert.Equal(t, DefaultMaxMessage+1, n)
	assert.Len(t, frame, DefaultMaxMessage)
}

func TestContentLengthFramer(t *testing.T) {
	pad := "X-Pad: " + strings.Repeat("p", 100) + "\r\n"
	tests := []struct {
		name string
		max  int
		in   string
		want framed
	}{
		{"one", 0, "Content-Length: 7\r\n\r\n{\"a\":1}", framed{frames: []string{`{"a":1}`}}},
		{"many in one buffer", 0, "Content-Length: 1\r\n\r\naContent-Length: 2\r\n\r\nbcContent-Length: 0\r\n\r\n",
			framed{frames: []string{"a", "bc", ""}}},
		{"lf line ends", 0, "Content-Length: 2\n\n{}", framed{frames: []string{"{}"}}},
		{"body holds crlf", 0, "Content-Length: 4\r\n\r\n\r\n\r\n", framed{frames: []string{"\r\n\r\n"}}},
		{"lower case", 0, "content-length: 2\r\n\r\n{}", framed{frames: []string{"{}"}}},
		{"upper case", 0, "CONTENT-LENGTH: 2\r\n\r\n{}", framed{frames: []string{"{}"}}},
		{"spaces around", 0, "Content-Length :   2  \r\n\r\n{}", framed{frames: []string{"{}"}}},
		{"no space", 0, "Content-Length:2\r\n\r\n{}", framed{frames: []string{"{}"}}},
		{"content-type after", 0, "Content-Length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}",
			framed{frames: []string{"{}"}}},
		{"content-type before", 0, "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
			framed{frames: []string{"{}"}}},
		{"same length twice", 0, "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}", framed{frames: []string{"{}"}}},
		{"blank lines between", 0, "\r\n\nContent-Length: 2\r\n\r\n{}\r\n", framed{frames: []string{"", "", "{}", ""}}},
		{"partial header", 0, "Content-Len", framed{rest: "Content-Len"}},
		{"partial header block", 0, "Content-Length: 2\r\n", framed{rest: "Content-Length: 2\r\n"}},
		{"partial body", 0, "Content-Length: 4\r\n\r\n{}", framed{rest: "Content-Length: 4\r\n\r\n{}"}},
		{"at limit", 2, "Content-Length: 2\r\n\r\n{}", framed{frames: []string{"{}"}}},
		{"over limit", 2, "Content-Length: 3\r\n\r\n{} ", framed{err: ErrTooLarge}},
		{"over limit before body", 2, "Content-Length: 3\r\n", framed{err: ErrTooLarge}},
		{"huge length", 0, "Content-Length: 99999999999999999999999999999\r\n", framed{err: ErrTooLarge}},
		{"huge bad length", 0, "Content-Length: 99999999999999999999999999999x\r\n", framed{err: ErrParse}},
		{"not a number", 0, "Content-Length: abc\r\n\r\n", framed{err: ErrParse}},
		{"empty value", 0, "Content-Length:\r\n\r\n", framed{err: ErrParse}},
		{"negative", 0, "Content-Length: -1\r\n\r\n", framed{err: ErrParse}},
		{"plus sign", 0, "Content-Length: +2\r\n\r\n{}", framed{err: ErrParse}},
		{"hex", 0, "Content-Length: 0x10\r\n\r\n", framed{err: ErrParse}},
		{"two numbers", 0, "Content-Length: 1 2\r\n\r\n", framed{err: ErrParse}},
		{"conflicting lengths", 0, "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{} ", framed{err: ErrParse}},
		{"no length", 0, "Content-Type: application/json\r\n\r\n{}", framed{err: ErrParse}},
		{"no colon", 0, "Content-Length 2\r\n\r\n{}", framed{err: ErrParse}},
		{"bad after good frame", 0, "Content-Length: 1\r\n\r\nxjunk\r\n\r\n", framed{frames: []string{"x"}, err: ErrParse}},
		{"header block at limit", 0, strings.Repeat(pad, 60) + "Content-Length: 2\r\n" + strings.Repeat("Y", maxHeaderBlock-60*len(pad)-19-4-2) + ": \r\n\r\n{}",
			framed{frames: []string{"{}"}}},
		{"header block over limit", 0, strings.Repeat(pad, 60) + "Content-Length: 2\r\n" + strings.Repeat("Y", maxHeaderBlock-60*len(pad)-19-4-1) + ": \r\n\r\n{}",
			framed{err: ErrTooLarge}},
		{"header lines without end", 0, strings.Repeat(pad, 100), framed{err: ErrTooLarge}},
		{"one long header line", 0, "X-Long: " + strings.Repeat("a", maxHeaderBlock), framed{err: ErrTooLarge}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ContentLengthFramer{MaxSize: tt.max}
			assert.Equal(t, tt.want, feedFramer(t, f, []byte(tt.in)), "whole")
			assert.Equal(t, tt.want, feedFramer(t, f, bytewise(tt.in)...), "byte by byte")
		})
	}
}

func TestAppendFrame(t *testing.T) {
	msgs := []string{`{"jsonrpc":"2.0","method":"a"}`, `{}`, `{"jsonrpc":"2.0","id":1,"result":{"text":"line\nbreak"}}`}
	for _, f := range []Framer{NewlineFramer{}, ContentLengthFramer{}} {
		t.Run(f.Name(), func(t *testing.T) {
			var stream []byte
			for _, m := range msgs {
				stream = f.AppendFrame(stream, []byte(m))
			}
			assert.Equal(t, framed{frames: msgs}, feedFramer(t, f, stream))
		})
	}
	assert.Equal(t, "{}\n", string(NewlineFramer{}.AppendFrame(nil, []byte("{}"))))
	assert.Equal(t, "Content-Length: 2\r\n\r\n{}", string(ContentLengthFramer{}.AppendFrame(nil, []byte("{}"))))
}

func TestFramerByName(t *testing.T) {
	tests := []struct {
		name string
		want Framer
		ok   bool
	}{
		{"", NewlineFramer{MaxSize: 9}, true},
		{"newline", NewlineFramer{MaxSize: 9}, true},
		{"ndjson", NewlineFramer{MaxSize: 9}, true},
		{"line", NewlineFramer{MaxSize: 9}, true},
		{"content-length", ContentLengthFramer{MaxSize: 9}, true},
		{"lsp", ContentLengthFramer{MaxSize: 9}, true},
		{"sse", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := FramerByName(tt.name, 9)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, f)
		})
	}
	assert.Equal(t, "newline", NewlineFramer{}.Name())
	assert.Equal(t, "content-length", ContentLengthFramer{}.Name())
}

func TestFramerAllocs(t *testing.T) {
	var nl, cl []byte
	for range 8 {
		nl = NewlineFramer{}.AppendFrame(nl, benchCall)
		cl = ContentLengthFramer{}.AppendFrame(cl, benchCall)
	}
	for _, tt := range []struct {
		f   Framer
		buf []byte
	}{{NewlineFramer{}, nl}, {ContentLengthFramer{}, cl}} {
		t.Run(tt.f.Name(), func(t *testing.T) {
			allocs := testing.AllocsPerRun(100, func() {
				buf := tt.buf
				for len(buf) > 0 {
					_, n, err := tt.f.Next(buf)
					if err != nil || n == 0 {
						t.Fatalf("n=%d err=%v", n, err)
					}
					buf = buf[n:]
				}
			})
			assert.Zero(t, allocs)
		})
	}
}

// fuzzFramer checks that feeding data in the chunks cuts chooses yields the
// same frames, leftover and error as feeding it whole.
func fuzzFramer(t *testing.T, f Framer, data, cuts []byte) {
	whole := feedFramer(t, f, data)
	split := feedFramer(t, f, splitAt(data, cuts)...)
	if whole.err != nil {
		whole.rest, split.rest = "", ""
	}
	require.Equal(t, whole, split)
}

func FuzzNewlineFramer(f *testing.F) {
	f.Add([]byte(string(benchCall)+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\r\n\n"), []byte{3, 0, 40, 1}, uint16(0))
	f.Add([]byte("a\r\nbb\r\r\nccc\n\rdddd"), []byte{1, 1, 1, 1, 1, 1}, uint16(3))
	f.Add([]byte("1234\r"), []byte{4}, uint16(4))
	f.Fuzz(func(t *testing.T, data, cuts []byte, limit uint16) {
		fr := NewlineFramer{MaxSize: int(limit)}
		fuzzFramer(t, fr, data, cuts)
		res := feedFramer(t, fr, data)
		for _, frame := range res.frames {
			require.NotContains(t, frame, "\n")
			require.LessOrEqual(t, len(frame), fr.max())
		}
	})
}

func FuzzContentLengthFramer(f *testing.F) {
	f.Add([]byte("Content-Length: 7\r\n\r\n{\"a\":1}content-length:2\nContent-Type: x\n\n{}\r\n"), []byte{5, 17, 0, 2}, uint16(0))
	f.Add([]byte("Content-Length: 3\r\nContent-Length: 3\r\n\r\nabcContent-Length: 9\r\n"), []byte{30}, uint16(5))
	f.Add([]byte("\r\n\nContent-Length: 0\r\n\r\nX: 1\r\n\r\n"), []byte{1, 1, 1}, uint16(0))
	f.Fuzz(func(t *testing.T, data, cuts []byte, limit uint16) {
		fr := ContentLengthFramer{MaxSize: int(limit)}
		fuzzFramer(t, fr, data, cuts)
		for _, frame := range feedFramer(t, fr, data).frames {
			require.LessOrEqual(t, len(frame), fr.max())
		}
	})
}
