package cluster

import (
	"encoding/binary"
	"sync"

	"github.com/mcpedge/mcpedge/session"
	"github.com/nats-io/nats.go"
)

// Bus is the cluster-wide session.Bus. Publish delivers to this node's
// subscribers at once, on the caller's goroutine, as the in-process bus
// does, and publishes the message on the cluster's bus subject; every
// other node delivers it to its own subscribers, on the goroutine of its
// NATS subscription. Each session is subscribed on one node only (the
// node that owns it), so it hears each message once; messages of one
// publisher arrive in publish order.
//
// A message is the topic's length (uvarint), the topic, then the payload.
// One that does not parse, or whose payload is not what its topic carries
// (busPayloadOK: subscribers splice payloads into messages to clients),
// is dropped and counted (Stats.BadMessages).
// Safe for concurrent use.
type Bus struct {
	n     *Node
	local *session.LocalBus
	subj  string
	bufs  sync.Pool // *[]byte
}

var _ session.Bus = (*Bus)(nil)

func newBus(n *Node) *Bus {
	b := &Bus{n: n, local: session.NewLocalBus(), subj: n.prefix + ".bus"}
	b.bufs.New = func() any { s := make([]byte, 0, 512); return &s }
	return b
}

// Publish implements session.Bus. A message that cannot be published
// (NATS down and its reconnect buffer full) reaches this node's
// subscribers only, and is counted in Stats.BusDropped.
func (b *Bus) Publish(topic string, payload []byte) {
	b.local.Publish(topic, payload)
	bp := b.bufs.Get().(*[]byte)
	m := appendBusMessage((*bp)[:0], topic, payload)
	if err := b.n.nc.Publish(b.subj, m); err != nil {
		b.n.stats.busDropped.Add(1)
	} else {
		b.n.stats.busOut.Add(1)
	}
	if cap(m) <= 64<<10 {
		*bp = m[:0]
		b.bufs.Put(bp)
	}
}

// Subscribe implements session.Bus: fn hears the messages of topic
// published on any node.
func (b *Bus) Subscribe(topic string, fn func(topic string, payload []byte)) (cancel func()) {
	return b.local.Subscribe(topic, fn)
}

// receive delivers a message another node published.
func (b *Bus) receive(m *nats.Msg) {
	topic, payload, ok := parseBusMessage(m.Data)
	if !ok || !busPayloadOK(topic, payload) {
		b.n.badMessage("bus", m.Data)
		return
	}
	b.n.stats.busIn.Add(1)
	b.local.Publish(topic, payload)
}

// appendBusMessage appends the wire form of a bus message to dst.
func appendBusMessage(dst []byte, topic string, payload []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(topic)))
	dst = append(dst, topic...)
	return append(dst, payload...)
}

// parseBusMessage splits a bus message; the topic is a copy, the payload
// aliases b.
func parseBusMessage(b []byte) (topic string, payload []byte, ok bool) {
	l, k := binary.Uvarint(b)
	if k <= 0 || l == 0 || l > uint64(len(b)-k) {
		return "", nil, false
	}
	return string(b[k : k+int(l)]), b[k+int(l):], true
}
