package codec

import (
	"sync"
	"unsafe"
)

// Buffer is a pooled byte buffer for encoding outbound messages. Whoever
// holds a *Buffer owns it until it calls PutBuffer (or hands it to a sink that
// documents it takes ownership). A Buffer is not safe for concurrent use.
type Buffer struct {
	B []byte
}

// maxPooled keeps one huge message from pinning its memory in the pool.
const maxPooled = 64 << 10

var buffers = sync.Pool{New: func() any { return &Buffer{B: make([]byte, 0, 512)} }}

// GetBuffer returns an empty buffer from the pool.
func GetBuffer() *Buffer { return buffers.Get().(*Buffer) }

// PutBuffer returns b to the pool; b must not be used afterwards.
func PutBuffer(b *Buffer) {
	if b == nil || cap(b.B) > maxPooled {
		return
	}
	b.B = b.B[:0]
	buffers.Put(b)
}

// b2s views b as a string without copying; the string must not outlive b's
// contents.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// s2b views s as a byte slice without copying; the slice must not be
// modified.
func s2b(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
