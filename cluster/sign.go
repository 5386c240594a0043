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
	pool sync.Pool // *macState of keys[0]
}

// macState is a pooled HMAC of the first key, with room for a sum: a sum
// on the stack escapes through hash.Hash, one allocation per message
// checked.
type macState struct {
	h   hash.Hash
	sum [macSize]byte
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
	s.pool.New = func() any { return &macState{h: hmac.New(sha256.New, s.keys[0])} }
	return s
}

// sign appends the signature of msg, which starts at dst[start:], to dst.
func (s *signer) sign(dst []byte, start int) []byte {
	m := s.pool.Get().(*macState)
	m.h.Reset()
	m.h.Write(dst[start:])
	dst = m.h.Sum(dst)
	s.pool.Put(m)
	return dst
}

// open checks the signature at the end of m and returns the message
// without it; ok is false when no key signed it.
func (s *signer) open(m []byte) ([]byte, bool) {
	if len(m) < macSize {
		return nil, false
	}
	body, mac := m[:len(m)-macSize], m[len(m)-macSize:]
	st := s.pool.Get().(*macState)
	defer s.pool.Put(st)
	for i, k := range s.keys {
		h := st.h
		if i == 0 {
			h.Reset()
		} else {
			h = hmac.New(sha256.New, k) // an older key: rare
		}
		h.Write(body)
		if hmac.Equal(h.Sum(st.sum[:0]), mac) {
			return body, true
		}
	}
	return nil, false
}
