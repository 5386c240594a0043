package codec

import "unsafe"

// A Mover moves what points into a buffer, Old, to the same place in its
// copy, New (same length, same bytes): a message decoded in a reader's
// buffer goes on in a copy of its own, its slices where they were in the
// copy, with no second decode. What points elsewhere is kept as it is
// (Decode corrects invalid UTF-8 in a copy of its input, and unescapes
// strings into new memory: that memory is the message's own).
type Mover struct{ Old, New []byte }

// offset returns where n bytes at p start in Old, and whether they lie
// in it.
func (mv Mover) offset(p unsafe.Pointer, n int) (uintptr, bool) {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mv.Old)))
	q := uintptr(p)
	return q - base, q >= base && q+uintptr(n) <= base+uintptr(len(mv.Old))
}

// Offset returns where b starts in Old, and whether it lies in Old.
func (mv Mover) Offset(b []byte) (int, bool) {
	off, ok := mv.offset(unsafe.Pointer(unsafe.SliceData(b)), len(b))
	return int(off), ok
}

// Bytes returns b moved to New, or b when it does not lie in Old.
func (mv Mover) Bytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	off, ok := mv.offset(unsafe.Pointer(unsafe.SliceData(b)), len(b))
	if !ok {
		return b
	}
	return mv.New[off : off+uintptr(len(b)) : off+uintptr(len(b))]
}

// String returns s moved to New, or s when it does not lie in Old.
func (mv Mover) String(s string) string {
	if len(s) == 0 {
		return s
	}
	off, ok := mv.offset(unsafe.Pointer(unsafe.StringData(s)), len(s))
	if !ok {
		return s
	}
	return unsafe.String(&mv.New[off], len(s))
}

// Rebase moves m's members that point into old (decoded from it) to the
// same place in nw, a copy of old (Mover).
func (m *Message) Rebase(old, nw []byte) {
	mv := Mover{Old: old, New: nw}
	m.ID, m.Params, m.Result, m.Error = mv.Bytes(m.ID), mv.Bytes(m.Params), mv.Bytes(m.Result), mv.Bytes(m.Error)
	m.Method, m.JSONRPC = mv.String(m.Method), mv.String(m.JSONRPC)
}
