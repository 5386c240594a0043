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

// LocalBus is an in-process Bus. Publish takes no lock: each topic holds an
// immutable subscriber slice replaced on change.
type LocalBus struct {
	mu     sync.Mutex
	topics sync.Map // string → *topic
	nextID atomic.Uint64
}

type subscriber struct {
	id uint64
	fn func(string, []byte)
}

type topic struct {
	subs atomic.Pointer[[]subscriber]
}

// NewLocalBus returns an empty in-process bus.
func NewLocalBus() *LocalBus { return &LocalBus{} }

// Publish implements Bus. Subscribers run synchronously on the caller's
// goroutine.
func (b *LocalBus) Publish(name string, payload []byte) {
	v, ok := b.topics.Load(name)
	if !ok {
		return
	}
	subs := v.(*topic).subs.Load()
	if subs == nil {
		return
	}
	for _, s := range *subs {
		s.fn(name, payload)
	}
}

// Subscribe implements Bus.
func (b *LocalBus) Subscribe(name string, fn func(string, []byte)) func() {
	id := b.nextID.Add(1)
	b.mu.Lock()
	v, _ := b.topics.LoadOrStore(name, &topic{})
	t := v.(*topic)
	var next []subscriber
	if cur := t.subs.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, subscriber{id: id, fn: fn})
	t.subs.Store(&next)
	b.mu.Unlock()

	var once sync.Once
	return func() { once.Do(func() { b.unsubscribe(name, t, id) }) }
}

func (b *LocalBus) unsubscribe(name string, t *topic, id uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := t.subs.Load()
	if cur == nil {
		return
	}
	next := make([]subscriber, 0, len(*cur))
	for _, s := range *cur {
		if s.id != id {
			next = append(next, s)
		}
	}
	if len(next) == 0 {
		t.subs.Store(nil)
		b.topics.Delete(name)
		return
	}
	t.subs.Store(&next)
}

// Subscribers returns the number of subscribers of topic.
func (b *LocalBus) Subscribers(name string) int {
	v, ok := b.topics.Load(name)
	if !ok {
		return 0
	}
	if subs := v.(*topic).subs.Load(); subs != nil {
		return len(*subs)
	}
	return 0
}
