package cluster

// ClientURL is the embedded server's client port, for the tests that
// play a local process trying it.
func (n *Node) ClientURL() string { return n.srv.ClientURL() }
