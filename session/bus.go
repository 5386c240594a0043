package session

import (
	"sync"
	"sync/atomic"
)

// Bus carries notifications between the parts of a server, and between
// servers in a cluster: resource updates and list changes are published to
// topics that sessions subscribe to. The in-process Bus is the default; a
// cluster bus (NATS) implements the same interface. Implementations are
// safe for concurrent use.
type Bus interface {
	// Publish delivers payload to every subscriber of topic. payload is
	// valid only during the call: subscribers that keep it copy it.
	Publish(topic string, payload []byte)
	// Subscribe calls fn for each message published to topic until the
	// returned cancel func is called. fn must not block.
	Subscribe(topic string, fn func(topic string, payload []byte)) (cancel func())
}

// Topics used by the engine.
const (
	TopicResourceUpdated = "resources/updated/" // + URI
	TopicListChanged     = "list_changed/"      // + "tools" | "resources" | "prompts"
)

// LocalBus is an in-process Bus. Each topic keeps its subscribers in a
// doubly linked list, in the order they subscribed. Subscribe and cancel
// take the topic's own lock for constant work (one link, one unlink),
// whatever the number of subscribers; Publish takes no lock and allocates
// nothing: it walks the list through atomic links.
//
// A subscriber removed while a publish walks the list keeps its link
// forward, so the walk goes on past it to the end; it is marked first, so
// a publish that reaches it after its cancel has returned skips it. A
// subscriber added during a publish may or may not be called by it.
type LocalBus struct {
	topics sync.Map // string → *topic
}

type topic struct {
	name string
	head atomic.Pointer[subscriber]
	n    atomic.Int64 // subscribers

	mu   sync.Mutex  // serializes Subscribe and cancel
	tail *subscriber // under mu
	gone bool        // under mu: emptied and removed from the map
}

type subscriber struct {
	next atomic.Pointer[subscriber]
	prev *subscriber // under the topic's mu
	dead atomic.Bool // cancelled: publishes skip it
	fn   func(string, []byte)
	t    *topic
	bus  *LocalBus
}

// NewLocalBus returns an empty in-process bus.
func NewLocalBus() *LocalBus { return &LocalBus{} }

// Publish implements Bus. Subscribers run synchronously on the caller's
// goroutine, in the order they subscribed; one may cancel its own
// subscription, or another's, from fn.
func (b *LocalBus) Publish(name string, payload []byte) {
	v, ok := b.topics.Load(name)
	if !ok {
		return
	}
	for s := v.(*topic).head.Load(); s != nil; s = s.next.Load() {
		if !s.dead.Load() {
			s.fn(name, payload)
		}
	}
}

// Subscribe implements Bus, in constant time.
func (b *LocalBus) Subscribe(name string, fn func(string, []byte)) func() {
	s := &subscriber{fn: fn, bus: b}
	for {
		v, ok := b.topics.Load(name)
		if !ok {
			v, _ = b.topics.LoadOrStore(name, &topic{name: name})
		}
		t := v.(*topic)
		t.mu.Lock()
		if t.gone { // emptied meanwhile: it is out of the map now
			t.mu.Unlock()
			continue
		}
		s.t, s.prev = t, t.tail
		if t.tail == nil {
			t.head.Store(s)
		} else {
			t.tail.next.Store(s)
		}
		t.tail = s
		t.n.Add(1)
		t.mu.Unlock()
		return s.cancel
	}
}

// cancel removes s from its topic, once, in constant time. Its forward
// link is left as it is, for the publishes walking past it.
func (s *subscriber) cancel() {
	if !s.dead.CompareAndSwap(false, true) {
		return
	}
	t := s.t
	t.mu.Lock()
	defer t.mu.Unlock()
	next := s.next.Load()
	if s.prev == nil {
		t.head.Store(next)
	} else {
		s.prev.next.Store(next)
	}
	if next == nil {
		t.tail = s.prev
	} else {
		next.prev = s.prev
	}
	if t.n.Add(-1) == 0 {
		t.gone = true
		s.bus.topics.CompareAndDelete(t.name, t)
	}
}

// Subscribers returns the number of subscribers of topic.
func (b *LocalBus) Subscribers(name string) int {
	v, ok := b.topics.Load(name)
	if !ok {
		return 0
	}
	return int(v.(*topic).n.Load())
}

// Topics returns the number of topics with subscribers.
func (b *LocalBus) Topics() int {
	n := 0
	b.topics.Range(func(any, any) bool { n++; return true })
	return n
}
