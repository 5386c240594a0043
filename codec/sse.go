package codec

import (
	"bytes"
	"strconv"
)

// Server-Sent Events (text/event-stream), as the Streamable HTTP transport
// uses them: the Append functions write events for servers, SSEParser reads
// them for clients. Both follow the WHATWG HTML "event stream" rules.

// AppendSSEEvent appends one event to dst: an "id:" line unless id is empty,
// an "event:" line unless event is empty, one "data:" line per line of data
// (data split at "\n", "\r\n" and "\r"; an empty data gives one empty
// "data:" line, so the event is still dispatched) and the blank line that
// ends the event. CR, LF and NUL bytes in id, and CR and LF in event, are
// dropped: they cannot be carried by the format and would otherwise let a
// value forge fields. A reader sees data with its line ends turned into "\n";
// JSON from this package's encoders holds no raw line end and arrives
// unchanged. AppendSSEEvent allocates only when dst must grow.
func AppendSSEEvent(dst []byte, id, event string, data []byte) []byte {
	if id != "" {
		dst = append(dst, "id: "...)
		dst = appendSSEValue(dst, id, true)
		dst = append(dst, '\n')
	}
	if event != "" {
		dst = append(dst, "event: "...)
		dst = appendSSEValue(dst, event, false)
		dst = append(dst, '\n')
	}
	for {
		line, rest, more := cutSSELine(data)
		if len(line) == 0 {
			dst = append(dst, "data:\n"...)
		} else {
			dst = append(dst, "data: "...)
			dst = append(dst, line...)
			dst = append(dst, '\n')
		}
		if !more {
			break
		}
		data = rest
	}
	return append(dst, '\n')
}

// AppendSSERetry appends a block that sets the client's reconnection delay
// to ms milliseconds (a negative ms is written as 0). The block ends with a
// blank line, so a parser reports it even when no event follows.
func AppendSSERetry(dst []byte, ms int) []byte {
	dst = append(dst, "retry: "...)
	dst = strconv.AppendInt(dst, int64(max(ms, 0)), 10)
	return append(dst, "\n\n"...)
}

// AppendSSEComment appends text as comment lines (one ":" line per line of
// text), which readers ignore: a keep-alive for proxies that close idle
// streams. No blank line follows, so a comment never dispatches an event.
func AppendSSEComment(dst []byte, text string) []byte {
	s := s2b(text)
	for {
		line, rest, more := cutSSELine(s)
		if len(line) == 0 {
			dst = append(dst, ":\n"...)
		} else {
			dst = append(dst, ": "...)
			dst = append(dst, line...)
			dst = append(dst, '\n')
		}
		if !more {
			return dst
		}
		s = rest
	}
}

// appendSSEValue appends s without CR and LF (and without NUL if noNUL).
func appendSSEValue(dst []byte, s string, noNUL bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\r' || c == '\n' || (c == 0 && noNUL):
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// cutSSELine splits b at its first line end ("\n", "\r\n" or "\r"); more
// reports whether there was one.
func cutSSELine(b []byte) (line, rest []byte, more bool) {
	lim := len(b)
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		lim = i
	}
	if j := bytes.IndexByte(b[:lim], '\r'); j >= 0 {
		if j+1 < len(b) && b[j+1] == '\n' {
			return b[:j], b[j+2:], true
		}
		return b[:j], b[j+1:], true
	}
	if lim < len(b) {
		return b[:lim], b[lim+1:], true
	}
	return b, nil, false
}

// SSEEvent is one block of an event stream, as SSEParser.Next reports it.
type SSEEvent struct {
	// ID is the stream's last event ID once the block is applied: the
	// value of the block's last valid "id" field, or the ID in force
	// before it. A client resuming the stream sends it as Last-Event-ID.
	ID string
	// Event is the event type; "message" when the block names none.
	Event string
	// Data is the event's data: the "data" field values joined with "\n".
	// When the event had one data line, Data aliases the buffer given to
	// Next; otherwise it is held by the parser. Either way it is valid only
	// until the next call to Next and while that buffer is unchanged.
	Data []byte
	// Retry is the reconnection delay in milliseconds the block set, if
	// HasRetry.
	Retry int
	// HasRetry reports whether the block held a valid "retry" field.
	HasRetry bool
}

// SSEParser reads an event stream incrementally. Like the Framers it keeps
// no bytes of its own between calls: the caller accumulates the stream in a
// buffer, calls Next, and drops the bytes Next consumed. The zero value is
// ready to use. An SSEParser is not safe for concurrent use.
type SSEParser struct {
	// MaxSize bounds one event block (its lines up to the blank line that
	// ends it) and one comment line; zero means DefaultMaxMessage. A
	// longer block is ErrTooLarge, reported as soon as the buffer holds
	// more than MaxSize bytes of it.
	MaxSize int

	lastID  string
	data    []byte // joined multi-line data
	started bool   // past the optional byte order mark
}

var utf8BOM = []byte("\xEF\xBB\xBF")

func (p *SSEParser) max() int {
	if p.MaxSize > 0 {
		return p.MaxSize
	}
	return DefaultMaxMessage
}

// LastEventID returns the last event ID seen, for a Last-Event-ID header.
func (p *SSEParser) LastEventID() string { return p.lastID }

// Reset prepares p for a new stream, forgetting the last event ID.
func (p *SSEParser) Reset() {
	p.lastID = ""
	p.data = p.data[:0]
	p.started = false
}

// Next parses the first block of buf, the unconsumed part of the stream, and
// returns n, the bytes to drop from its front:
//
//   - ok true: a block ended and dispatched ev (it held a "data" field);
//   - ok false, n > 0: n bytes were consumed without dispatching an event
//     (blank lines, comments, or a block with no data); ev.ID and, if
//     ev.HasRetry, ev.Retry still apply;
//   - ok false, n == 0: buf holds no complete block; read more and call
//     again with the same bytes followed by the new ones.
//
// Lines end with "\n", "\r\n" or "\r"; a "\r" at the end of buf counts as a
// line end, and a "\n" that follows it in a later read as a blank line,
// which is harmless. Fields take effect when their block is complete. A
// stream that ends inside a block loses that block, as the standard says.
// Next returns ErrTooLarge for a block or comment line over MaxSize, after
// which the stream cannot be read further. Next allocates only to record a
// new event ID or an event type other than "message", and when a joined
// multi-line data outgrows the parser's buffer.
func (p *SSEParser) Next(buf []byte) (ev SSEEvent, n int, ok bool, err error) {
	off := 0
	if !p.started {
		if len(buf) < len(utf8BOM) && bytes.HasPrefix(utf8BOM, buf) {
			return ev, 0, false, nil
		}
		if bytes.HasPrefix(buf, utf8BOM) {
			off = len(utf8BOM)
		}
	}
	limit := p.max()
	sc := sseScanner{b: buf[off:], nl: -1}
	if len(sc.b) > 0 && sc.b[0] == ':' {
		// Leading comment lines are consumed on their own, so keep-alive
		// comments never pile up in the caller's buffer.
		pos := 0
		for pos < len(sc.b) && sc.b[pos] == ':' {
			end, next := sc.line(pos)
			if end-pos > limit {
				return ev, 0, false, ErrTooLarge
			}
			if next < 0 {
				break
			}
			pos = next
		}
		if pos == 0 {
			return ev, 0, false, nil
		}
		p.started = true
		ev.ID = p.lastID
		return ev, off + pos, false, nil
	}

	var (
		data, event, id []byte
		ndata           int
		hasID           bool
	)
	pos := 0
	for {
		end, next := sc.line(pos)
		if next < 0 {
			if len(sc.b) > limit {
				return SSEEvent{}, 0, false, ErrTooLarge
			}
			return SSEEvent{}, 0, false, nil
		}
		if end == pos {
			// Blank line: the block is complete.
			n = off + next
			break
		}
		if next > limit {
			// The block's lines, this one's end included, exceed the limit.
			return SSEEvent{}, 0, false, ErrTooLarge
		}
		line := sc.b[pos:end]
		pos = next
		if line[0] == ':' {
			continue
		}
		field, value := line, line[len(line):]
		if c := bytes.IndexByte(line, ':'); c >= 0 {
			field, value = line[:c], line[c+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			switch ndata {
			case 0:
				data = value
			case 1:
				p.data = append(p.data[:0], data...)
				fallthrough
			default:
				p.data = append(p.data, '\n')
				p.data = append(p.data, value...)
				data = p.data
			}
			ndata++
		case "event":
			event = value
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				id, hasID = value, true
			}
		case "retry":
			if ms, valid := parseRetry(value); valid {
				ev.Retry, ev.HasRetry = ms, true
			}
		}
	}

	p.started = true
	if hasID && string(id) != p.lastID {
		p.lastID = string(id)
	}
	ev.ID = p.lastID
	if ndata == 0 {
		return ev, n, false, nil
	}
	ev.Data = data
	if len(event) == 0 || string(event) == "message" {
		ev.Event = "message"
	} else {
		ev.Event = string(event)
	}
	return ev, n, true, nil
}

// parseRetry parses a retry value: one or more ASCII digits that fit an int.
func parseRetry(v []byte) (int, bool) {
	if len(v) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int(c - '0')
		if n > (maxInt-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

const maxInt = int(^uint(0) >> 1)

// sseScanner finds line ends in b, remembering where the next "\n" is so
// that a stream of "\r"-terminated lines is scanned in linear time.
type sseScanner struct {
	b  []byte
	nl int // index of the first '\n' at or after the last search; len(b) if none; -1 unknown
}

// line returns the end of the line that starts at pos (the index of its
// terminator) and next, the index after the terminator, or -1 when the line
// is not terminated yet (end is then len(b)).
func (s *sseScanner) line(pos int) (end, next int) {
	if s.nl < pos {
		if i := bytes.IndexByte(s.b[pos:], '\n'); i >= 0 {
			s.nl = pos + i
		} else {
			s.nl = len(s.b)
		}
	}
	if j := bytes.IndexByte(s.b[pos:s.nl], '\r'); j >= 0 {
		end = pos + j
		if end+1 < len(s.b) && s.b[end+1] == '\n' {
			return end, end + 2
		}
		return end, end + 1
	}
	if s.nl < len(s.b) {
		return s.nl, s.nl + 1
	}
	return len(s.b), -1
}
