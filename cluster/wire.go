package cluster

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// The forwarding wire formats. Lengths are uvarints.
//
// A forwarded request, sent to "<prefix>.http.<owner>" with the reply
// subject "<prefix>.reply.<sender>.<token>":
//
//	'F' remote(len, bytes) method(len, bytes) uri(len, bytes)
//	(key(len, bytes) value(len, bytes))* 0 body...
//
// The owner answers on the reply subject with frames, each
// kind seq(uvarint, from 0, one up per frame) and then:
//
//	'P'  nothing: still working (sent every third of ForwardTimeout)
//	'R'  status (key value)* 0 body...: the whole answer
//	'H'  status (key value)* 0 stream(1 byte): the head; 'D'
//	     frames carry the body, 'E' or 'X' ends it
//	'D'  body bytes
//	'E'  nothing: the body is complete
//	'X'  reason...: the body failed part way
//	'J'  status retryAfter(seconds, 0: none) body...: the whole answer
//	     to a direct message (direct.go)
//	'N'  nothing: the direct message was not served so; nothing was
//	     done, and the whole request may be sent
//
// A cancel, sent to "<prefix>.cancel.<owner>", is the reply subject of the
// request whose client went away.
const (
	reqMagic = 'F'

	frPending = 'P'
	frWhole   = 'R'
	frHead    = 'H'
	frData    = 'D'
	frEnd     = 'E'
	frFailed  = 'X'

	frDirect    = 'J'
	frNotDirect = 'N'
)

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendUvarint(dst []byte, v int) []byte {
	return binary.AppendUvarint(dst, uint64(v))
}

func appendUvarint64(dst []byte, v uint64) []byte {
	return binary.AppendUvarint(dst, v)
}

// appendHeader appends header k: v when it travels with a forwarded
// request or answer. A list of headers ends with an empty key (one 0
// byte): one pass over the headers, with nothing to count first.
func appendHeader(dst, k, v []byte) []byte {
	if !forwardHeader(k) || len(k) == 0 {
		return dst
	}
	return appendBytes(appendBytes(dst, k), v)
}

// endHeaders appends the empty key that ends a list of headers.
func endHeaders(dst []byte) []byte { return append(dst, 0) }

// forwardHeader reports whether header k travels with a forwarded
// request or answer: not the ones that describe one hop. Accept-Encoding
// does not either: the owner answers uncompressed, so that the node that
// relays the answer checks all of it, and may end a stream with an error
// of its own (forward.go).
// The length picks the one or two names to compare (the comparisons
// were 2% of a forwarded call).
func forwardHeader(k []byte) bool {
	switch len(k) {
	case 4:
		return !bytes.EqualFold(k, []byte("Date"))
	case 6:
		return !bytes.EqualFold(k, []byte("Server"))
	case 10:
		return !bytes.EqualFold(k, []byte("Connection")) && !bytes.EqualFold(k, []byte("Keep-Alive"))
	case 14:
		return !bytes.EqualFold(k, []byte("Content-Length"))
	case 15:
		return !bytes.EqualFold(k, []byte("Accept-Encoding"))
	case 17:
		return !bytes.EqualFold(k, []byte("Transfer-Encoding"))
	}
	return true
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// reader reads the wire formats; a short or malformed input sets bad.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *reader) bytes() []byte {
	l := r.uvarint()
	if r.bad || l > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	v := r.b[:l:l]
	r.b = r.b[l:]
	return v
}

func (r *reader) byte() byte {
	if r.bad || len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// headers reads a list of headers, up to its empty key, onto dst; more
// than max of them is bad.
func (r *reader) headers(dst [][2][]byte, max int) [][2][]byte {
	for !r.bad {
		k := r.bytes()
		if len(k) == 0 {
			return dst
		}
		if len(dst) == max {
			r.bad = true
			break
		}
		dst = append(dst, [2][]byte{k, r.bytes()})
	}
	return dst
}

// frame is one parsed reply frame. Its slices alias the message.
type frame struct {
	kind    byte
	seq     uint64
	status  int
	headers [][2][]byte // 'R', 'H'
	stream  bool        // 'H'
	retry   int         // 'J': Retry-After seconds, 0 for none
	body    []byte      // 'R', 'D', 'X', 'J'
}

// parseFrame parses a reply frame; ok is false when it does not parse, or
// names a header no client may be sent (headerOK).
func parseFrame(b []byte, hdrs [][2][]byte) (f frame, ok bool) {
	r := reader{b: b}
	f.kind = r.byte()
	f.seq = r.uvarint()
	switch f.kind {
	case frPending, frEnd, frNotDirect:
	case frDirect:
		st, retry := r.uvarint(), r.uvarint()
		if st < 100 || st > 999 || retry > maxRetryAfter {
			return f, false
		}
		f.status, f.retry, f.body = int(st), int(retry), r.b
	case frData, frFailed:
		f.body = r.b
	case frWhole, frHead:
		st := r.uvarint()
		if st < 100 || st > 999 {
			return f, false
		}
		f.status = int(st)
		f.headers = r.headers(hdrs[:0], 256)
		for _, kv := range f.headers {
			if !headerOK(kv[0], kv[1]) {
				return f, false
			}
		}
		if f.kind == frHead {
			f.stream = r.byte() == 1
		} else {
			f.body = r.b
		}
	default:
		return f, false
	}
	return f, !r.bad
}

// appendFrameStart appends a frame's kind and sequence number.
func appendFrameStart(dst []byte, kind byte, seq uint64) []byte {
	return binary.AppendUvarint(append(dst, kind), seq)
}

// token parses the token at the end of a reply subject.
func token(subject, prefix string) (uint64, bool) {
	if len(subject) <= len(prefix) || subject[:len(prefix)] != prefix {
		return 0, false
	}
	v, err := strconv.ParseUint(subject[len(prefix):], 36, 64)
	return v, err == nil
}
