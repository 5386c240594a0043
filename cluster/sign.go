package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// The cluster's own messages (membership, session records, kept events,
// cancellations) are signed: HMAC-SHA256 with a key derived from
// Options.Keys, which every node shares (-state-key-file). A client of
// the NATS deployment that may publish on the cluster's subjects but
// does not hold the keys cannot forge one: what fails the check is
// dropped and counted (Stats.BadMessages). Forwarded requests and their
// answers are not signed: they travel on subjects only the nodes may use
// (embedded), or that the deployment's permissions guard (-cluster), as
// before.

// macSize is the size of a signature, at the end of a signed message.
const macSize = sha256.Size

// signer signs with the first key and verifies with any (a key rotates as
// the state keys do).
type signer struct {
	keys [][]byte
	pool sync.Pool // hash.Hash of keys[0]
}

// clusterKeyLabel separates the cluster's key from the requestState keys
// it is derived from.
const clusterKeyLabel = "mcpedge cluster messages v1"

func newSigner(keys [][]byte) *signer {
	s := &signer{}
	for _, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(clusterKeyLabel))
		s.keys = append(s.keys, m.Sum(nil))
	}
	s.pool.New = func() any { return hmac.New(sha256.New, s.keys[0]) }
	return s
}

// sign appends the signature of msg, which starts at dst[start:], to dst.
func (s *signer) sign(dst []byte, start int) []byte {
	h := s.pool.Get().(hash.Hash)
	h.Reset()
	h.Write(dst[start:])
	dst = h.Sum(dst)
	s.pool.Put(h)
	return dst
}

// open checks the signature at the end of m and returns the message
// without it; ok is false when no key signed it.
func (s *signer) open(m []byte) ([]byte, bool) {
	if len(m) < macSize {
		return nil, false
	}
	body, mac := m[:len(m)-macSize], m[len(m)-macSize:]
	var sum [macSize]byte
	for i, k := range s.keys {
		var h hash.Hash
		if i == 0 {
			h = s.pool.Get().(hash.Hash)
			h.Reset()
		} else {
			h = hmac.New(sha256.New, k)
		}
		h.Write(body)
		ok := hmac.Equal(h.Sum(sum[:0]), mac)
		if i == 0 {
			s.pool.Put(h)
		}
		if ok {
			return body, true
		}
	}
	return nil, false
}
