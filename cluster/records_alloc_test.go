//go:build !race

// The race detector makes sync.Pool drop items at random (the signer's
// hashes are pooled), so allocation counts hold only without it.

package cluster

import "testing"

// TestAppendSignedAllocs: a replica's word to the home that a session is
// in use (sent by its first request of the session there), a cancel and a
// session's end are built without allocating, in a buffer the caller
// keeps; and they open as they were built.
func TestAppendSignedAllocs(t *testing.T) {
	n := &Node{sig: newSigner([][]byte{[]byte("0123456789abcdef0123456789abcdef")})}
	sid, reqID := "a.0123456789abcdef0123456789abcdef", []byte(`"r-1"`)
	buf := make([]byte, 0, 512)
	for _, tc := range []struct {
		kind  byte
		extra []byte
	}{{recUsed, nil}, {recEnd, nil}, {recCancel, reqID}} {
		if a := testing.AllocsPerRun(200, func() { buf = n.appendSigned(buf[:0], tc.kind, sid, tc.extra) }); a != 0 {
			t.Errorf("%c: %v allocations", tc.kind, a)
		}
		body, ok := n.sig.open(buf)
		if !ok || body[0] != tc.kind {
			t.Fatalf("%c: does not open: %q", tc.kind, buf)
		}
		r := reader{b: body[1:]}
		if got := r.bytes(); string(got) != sid {
			t.Errorf("%c: session %q", tc.kind, got)
		}
		if tc.extra != nil {
			if got := r.bytes(); string(got) != string(reqID) {
				t.Errorf("%c: request id %q", tc.kind, got)
			}
		}
		if r.bad || len(r.b) != 0 {
			t.Errorf("%c: %d bytes left over, bad %v", tc.kind, len(r.b), r.bad)
		}
	}
}
