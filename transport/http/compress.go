package http

import (
	"bytes"
	"errors"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/valyala/fasthttp"
)

// encoding is a content coding of responses and request bodies.
type encoding uint8

const (
	encIdentity encoding = iota
	encGzip
	encZstd
)

func (e encoding) header() []byte {
	switch e {
	case encGzip:
		return []byte("gzip")
	case encZstd:
		return []byte("zstd")
	}
	return nil
}

// pickEncoding chooses the response coding an Accept-Encoding header
// admits: zstd, else gzip, else none.
func pickEncoding(h []byte) encoding {
	var gz, zs, star bool
	for len(h) > 0 {
		var item []byte
		item, h, _ = bytes.Cut(h, []byte(","))
		name, params, _ := bytes.Cut(item, []byte(";"))
		if qZero(params) {
			continue
		}
		name = bytes.TrimSpace(name)
		switch {
		case bytes.EqualFold(name, []byte("zstd")):
			zs = true
		case bytes.EqualFold(name, []byte("gzip")), bytes.EqualFold(name, []byte("x-gzip")):
			gz = true
		case bytes.Equal(name, []byte("*")):
			star = true
		}
	}
	switch {
	case zs:
		return encZstd
	case gz || star:
		return encGzip
	}
	return encIdentity
}

// responseEncoding is the coding for a response of n bytes to ctx (SSE
// streams pass n < 0: they are compressed whenever the client admits it).
func (s *Server) responseEncoding(ctx *fasthttp.RequestCtx, n int) encoding {
	if s.opts.CompressMin < 0 || (n >= 0 && n < s.opts.CompressMin) {
		return encIdentity
	}
	return pickEncoding(ctx.Request.Header.PeekCanonical(hdrAcceptEncoding))
}

// writeJSON answers ctx with a JSON body, compressed when it is large
// enough and the client admits a coding. body is copied.
func (s *Server) writeJSON(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentTypeBytes(ctJSON)
	enc := s.responseEncoding(ctx, len(body))
	switch enc {
	case encGzip:
		zw := s.gzipWriter(ctx.Response.BodyWriter())
		_, _ = zw.Write(body) // writes to a memory buffer: no error
		_ = zw.Close()
		s.gzw.Put(zw)
	case encZstd:
		zenc, _ := s.zstdCodec()
		b := codec.GetBuffer()
		b.B = zenc.EncodeAll(body, b.B[:0])
		ctx.SetBody(b.B)
		codec.PutBuffer(b)
	default:
		ctx.SetBody(body)
		return
	}
	ctx.Response.Header.SetContentEncodingBytes(enc.header())
	ctx.Response.Header.SetBytesKV(hdrVary, valAcceptEnc)
}

func (s *Server) gzipWriter(w io.Writer) *gzip.Writer {
	if zw, ok := s.gzw.Get().(*gzip.Writer); ok {
		zw.Reset(w)
		return zw
	}
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // fails only for an invalid level
	return zw
}

// streamCompressor compresses one SSE stream, flushed after each batch of
// events so that every event reaches the client at once.
type streamCompressor interface {
	io.WriteCloser
	Flush() error
	Reset(w io.Writer)
}

func (s *Server) streamCompressor(enc encoding, w io.Writer) streamCompressor {
	if enc == encGzip {
		return s.gzipWriter(w)
	}
	if zw, ok := s.zsw.Get().(*zstd.Encoder); ok {
		zw.Reset(w)
		return zw
	}
	// Errors are possible only for invalid options, which these are not.
	zw, _ := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true), zstd.WithWindowSize(1<<17))
	return zw
}

func (s *Server) putStreamCompressor(c streamCompressor) {
	c.Reset(nil)
	switch c := c.(type) {
	case *gzip.Writer:
		s.gzw.Put(c)
	case *zstd.Encoder:
		s.zsw.Put(c)
	}
}

// errBodyTooLarge is a decompressed body over the message limit.
var errBodyTooLarge = errors.New("mcphttp: decompressed body over the size limit")

// requestBody returns the POST body of ctx, decompressed into c.dec when it
// has a Content-Encoding. It answers 413, 415 or 400 and reports false when
// the body cannot be had.
func (s *Server) requestBody(ctx *fasthttp.RequestCtx, c *call) ([]byte, bool) {
	body := ctx.Request.Body()
	ce := bytes.TrimSpace(ctx.Request.Header.ContentEncoding())
	var err error
	switch {
	case len(ce) == 0 || bytes.EqualFold(ce, []byte("identity")):
		return body, true
	case bytes.EqualFold(ce, []byte("gzip")) || bytes.EqualFold(ce, []byte("x-gzip")):
		c.dec, err = s.gunzip(c.dec[:0], body)
	case bytes.EqualFold(ce, []byte("zstd")):
		_, zdec := s.zstdCodec()
		c.dec, err = zdec.DecodeAll(body, c.dec[:0])
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) || (err == nil && len(c.dec) > s.max) {
			err = errBodyTooLarge
		}
	default:
		s.fail(ctx, fasthttp.StatusUnsupportedMediaType, codeTransport, "Unsupported Media Type: Content-Encoding "+string(ce)+" (gzip, zstd or identity)")
		return nil, false
	}
	switch {
	case errors.Is(err, errBodyTooLarge):
		s.fail(ctx, fasthttp.StatusRequestEntityTooLarge, codeTransport, "Request Entity Too Large: the decompressed body exceeds the message limit")
		return nil, false
	case err != nil:
		s.fail(ctx, fasthttp.StatusBadRequest, codeTransport, "Bad Request: cannot decompress the body: "+err.Error())
		return nil, false
	}
	return c.dec, true
}

// gunzip appends the gzip-decompressed src to dst, up to the message limit.
func (s *Server) gunzip(dst, src []byte) ([]byte, error) {
	zr, _ := s.gzr.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(src))
	} else {
		err = zr.Reset(bytes.NewReader(src))
	}
	if err != nil {
		return dst, err
	}
	defer s.gzr.Put(zr)
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := zr.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > s.max {
			return dst, errBodyTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}
