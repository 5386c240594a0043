package codec

import (
	"bytes"
	"strconv"
)

// DefaultMaxMessage is the default limit on one message: 4 MiB.
const DefaultMaxMessage = 4 << 20

// maxHeaderBlock bounds a Content-Length header block.
const maxHeaderBlock = 8 << 10

// Framer splits a byte stream into JSON-RPC frames and frames outbound
// messages. Framers hold no state between calls: the unconsumed tail of a
// stream stays in the caller's buffer until more bytes arrive. They are safe
// for concurrent use.
type Framer interface {
	// Next finds the first complete frame in buf. It returns the frame (a
	// sub-slice of buf, without delimiters) and n, the bytes to consume.
	// n == 0 means buf holds no complete frame yet; a frame may be empty
	// (a blank line) with n > 0, which callers skip. An error means the
	// stream cannot be framed (a frame over the limit, a bad header) and
	// the connection should be closed after answering.
	Next(buf []byte) (frame []byte, n int, err error)
	// AppendFrame appends msg, framed, to dst.
	AppendFrame(dst, msg []byte) []byte
	// Name is the framing's flag name: "newline" or "content-length".
	Name() string
}

// NewlineFramer frames newline-delimited JSON (stdio, TCP): one message per
// line, "\r\n" accepted. MaxSize bounds a line; zero means DefaultMaxMessage.
type NewlineFramer struct{ MaxSize int }

func (f NewlineFramer) max() int {
	if f.MaxSize > 0 {
		return f.MaxSize
	}
	return DefaultMaxMessage
}

// Next implements Framer. A line longer than the limit (not counting its
// "\n" or "\r\n") is ErrTooLarge, reported as soon as buf holds more than
// the limit without a line end, so a peer cannot make the caller buffer
// unbounded input. Next does not allocate.
func (f NewlineFramer) Next(buf []byte) ([]byte, int, error) {
	i := bytes.IndexByte(buf, '\n')
	if i < 0 {
		n := len(buf)
		if n > 0 && buf[n-1] == '\r' {
			n-- // may yet be the start of "\r\n"
		}
		if n > f.max() {
			return nil, 0, ErrTooLarge
		}
		return nil, 0, nil
	}
	frame := buf[:i]
	if i > 0 && frame[i-1] == '\r' {
		frame = frame[:i-1]
	}
	if len(frame) > f.max() {
		return nil, 0, ErrTooLarge
	}
	return frame, i + 1, nil
}

// AppendFrame implements Framer. msg must hold no raw newline, which the
// encoders of this package guarantee.
func (NewlineFramer) AppendFrame(dst, msg []byte) []byte {
	dst = append(dst, msg...)
	return append(dst, '\n')
}

// Name implements Framer.
func (NewlineFramer) Name() string { return "newline" }

// ContentLengthFramer frames LSP-style messages: a header block with a
// Content-Length field, a blank line, then exactly that many bytes. Header
// names are case-insensitive; other headers (Content-Type) are ignored; "\n"
// line ends are accepted as well as "\r\n".
type ContentLengthFramer struct{ MaxSize int }

func (f ContentLengthFramer) max() int {
	if f.MaxSize > 0 {
		return f.MaxSize
	}
	return DefaultMaxMessage
}

var contentLength = []byte("content-length")

// Next implements Framer. Blank lines before a header block are returned as
// empty frames. A header block without Content-Length, a header line without
// a colon, a Content-Length that is not a decimal number, or two that
// disagree is ErrParse; a Content-Length over the limit, or a header block
// over 8 KiB, is ErrTooLarge. Next does not allocate.
func (f ContentLengthFramer) Next(buf []byte) ([]byte, int, error) {
	length := -1
	i := 0
	for {
		nl := bytes.IndexByte(buf[i:], '\n')
		if nl < 0 {
			if len(buf) > maxHeaderBlock {
				return nil, 0, ErrTooLarge
			}
			return nil, 0, nil
		}
		line := buf[i : i+nl]
		i += nl + 1
		if i > maxHeaderBlock {
			return nil, 0, ErrTooLarge
		}
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if len(line) == 0 {
			if length >= 0 {
				break
			}
			if i == nl+1 {
				// A blank line between messages: tolerated.
				return nil, i, nil
			}
			return nil, 0, ErrParse // a header block without Content-Length
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			return nil, 0, ErrParse
		}
		if !equalFoldASCII(bytes.TrimSpace(line[:colon]), contentLength) {
			continue
		}
		n, err := parseLength(bytes.TrimSpace(line[colon+1:]), f.max())
		if err != nil {
			return nil, 0, err
		}
		if length >= 0 && n != length {
			return nil, 0, ErrParse
		}
		length = n
	}
	if len(buf)-i < length {
		return nil, 0, nil
	}
	return buf[i : i+length], i + length, nil
}

// parseLength parses a Content-Length value: one or more ASCII digits, at
// most limit.
func parseLength(v []byte, limit int) (int, error) {
	if len(v) == 0 {
		return 0, ErrParse
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, ErrParse
		}
		n = n*10 + int(c-'0')
		if n > limit {
			// Keep scanning so that a malformed value is ErrParse whatever
			// its length, but stop accumulating before it can overflow.
			for _, c := range v {
				if c < '0' || c > '9' {
					return 0, ErrParse
				}
			}
			return 0, ErrTooLarge
		}
	}
	return n, nil
}

// AppendFrame implements Framer.
func (ContentLengthFramer) AppendFrame(dst, msg []byte) []byte {
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(msg)), 10)
	dst = append(dst, "\r\n\r\n"...)
	return append(dst, msg...)
}

// Name implements Framer.
func (ContentLengthFramer) Name() string { return "content-length" }

// FramerByName returns the framer a flag names: "newline" (or "ndjson",
// "line") or "content-length" (or "lsp").
func FramerByName(name string, maxSize int) (Framer, bool) {
	switch name {
	case "", "newline", "ndjson", "line":
		return NewlineFramer{MaxSize: maxSize}, true
	case "content-length", "lsp":
		return ContentLengthFramer{MaxSize: maxSize}, true
	}
	return nil, false
}

func equalFoldASCII(a, lower []byte) bool {
	if len(a) != len(lower) {
		return false
	}
	for i := range a {
		c := a[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
