package cluster

import "github.com/nats-io/nats.go"

// ClientURL is the embedded server's client port, for the tests that
// play a local process trying it.
func (n *Node) ClientURL() string { return n.srv.ClientURL() }

// Crash stops the node as a process that dies would: no goodbye, no
// drain; its NATS connection and embedded server just go.
func (n *Node) Crash() {
	n.tunMu.Lock()
	n.closed.Store(true)
	n.tunMu.Unlock()
	close(n.workersStop)
	n.tickOnce.Do(func() {})
	if n.tickStop != nil {
		close(n.tickStop)
	}
	n.nc.Close()
	n.shutdownEmbedded()
	n.closeLinks()
}

// Instance is the node's instance name.
func (n *Node) InstanceName() string { return n.inst }

// LivePeers is the number of other nodes this one knows alive.
func (n *Node) LivePeers() int { return n.livePeers() }

// DropLinks ends every direct link the node holds, as a network that
// cuts them would; its listener stays.
func (n *Node) DropLinks() {
	n.linkMu.Lock()
	links := make([]*linkConn, 0, len(n.links))
	for lc := range n.links {
		links = append(links, lc)
	}
	n.linkMu.Unlock()
	for _, lc := range links {
		lc.shut()
	}
}

// EventMessage is the signed message Event publishes for an event.
func (n *Node) EventMessage(sid string, stream, seq uint64, reqID []byte, final bool, data []byte) []byte {
	return n.appendEvent(nil, sid, stream, seq, reqID, final, data)
}

// KeepEvent takes an event's message as if it came on the events subject.
func (n *Node) KeepEvent(m []byte) { n.onEvent(&nats.Msg{Data: m}) }
