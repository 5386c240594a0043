package engine

import (
	"net/netip"
	"sync"

	"github.com/mcpedge/mcpedge/session"
)

// The fair scheduler in front of the worker pool.
//
// A request for a handler goes to a worker at once when one is free and
// nothing waits: one client alone may use the whole pool. Otherwise it
// waits in its key's queue: the key is the authenticated subject of its
// caller, else its session, else (a stateless 2026-07-28 exchange, which
// has no session) its client's address. The keys with requests waiting
// form a ring, and a worker that ends a job takes the next request of
// the next key (round robin: deficit round robin with every request
// costing one), on the same goroutine, so the pool never idles while
// anything waits. A key that starts waiting joins the ring behind every
// key already in it: its first request starts after at most one start per
// other waiting key, each when a worker ends its job, however many
// requests those keys have queued. A key's queue is bounded
// (Options.QueuePerClient, -queue-per-client), and so are all the queues
// together (Options.QueueTotal, -queue-total): only a request that finds
// its key's queue, or every queue, full is refused. A key holds state
// only while it has requests waiting (and, for a stateless client, while
// it has requests admitted), so the keys are at most the requests queued
// plus the workers, whatever number of clients come and go.
//
// Enqueueing takes one short lock, never blocks and allocates nothing:
// the request is its own queue node (request.qnext), and a key's state
// comes from a free list.
//
// A subscriptions/listen whose filter is read on a worker queues as a
// request does. The other jobs of the pool (task handlers, big frames)
// take a worker only when one is free (tryAcquire): they keep their own
// bounds (-task-workers, the session's in-flight set), a big frame that
// finds none is served by its transport's goroutine instead (handleBig),
// and a worker that ends one takes the next waiting request too.

// flowKey is whose share a request counts against.
type flowKey struct {
	sub  string           // an authenticated subject
	sess *session.Session // else a session
	addr netip.Addr       // else a stateless client's address
}

// flow is one key's queue, and for a stateless client its requests
// admitted (Options.MaxInflight by key).
type flow struct {
	key        flowKey
	head, tail *request
	queued     int
	inflight   int   // stateless: admitted, queued or running
	next, prev *flow // the ring of flows with requests queued
	free       *flow // the free list
}

// scheduler is the fair scheduler in front of the pool.
type scheduler struct {
	mu      sync.Mutex
	workers int // the pool's size: jobs running at most
	running int // jobs running
	queued  int // requests queued, all keys
	perKey  int // requests one key may have queued; <= 0: no bound but total
	total   int // requests all keys may have queued
	ring    *flow
	flows   map[flowKey]*flow
	free    *flow
	invoke  func(any) error // starts a job on a worker of the pool
}

func newScheduler(workers, perKey, total int, invoke func(any) error) *scheduler {
	return &scheduler{workers: workers, perKey: perKey, total: total, flows: map[flowKey]*flow{}, invoke: invoke}
}

// setQueues changes the queues' bounds (SetLimits). Requests queued
// beyond new bounds stay queued.
func (q *scheduler) setQueues(perKey, total int) {
	q.mu.Lock()
	q.perKey, q.total = perKey, total
	q.mu.Unlock()
}

// stats returns the jobs running and the requests queued.
func (q *scheduler) stats() (running, queued int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running, q.queued
}

// submit hands r, an admitted request, to a worker when one is
// free and nothing is queued, else queues it under key. A stateless
// client's request (stateless) is counted in its key's flow while it is
// admitted, within maxInflight (<= 0: no limit); release ends that. It
// returns the refusal when the request can be neither started nor
// queued, or when the pool cannot start it (released: shut down).
func (q *scheduler) submit(r *request, key flowKey, stateless bool, maxInflight int) *LimitError {
	q.mu.Lock()
	var f *flow
	if stateless {
		f = q.flowLocked(key)
		if maxInflight > 0 && f.inflight >= maxInflight {
			q.dropIfIdleLocked(f)
			q.mu.Unlock()
			return errInflight
		}
		f.inflight++
		r.flow = f
	}
	if q.queued == 0 && q.running < q.workers {
		q.running++
		q.mu.Unlock()
		if err := q.invoke(r); err != nil {
			q.mu.Lock()
			q.running--
			q.releaseLocked(r)
			q.mu.Unlock()
			return errWorkers
		}
		return nil
	}
	var refusal *LimitError
	switch {
	case q.queued >= q.total:
		refusal = errWorkers
	case f == nil:
		f = q.flowLocked(key)
	}
	if refusal == nil && q.perKey > 0 && f.queued >= q.perKey {
		refusal = errQueue
	}
	if refusal != nil {
		if f != nil {
			q.releaseLocked(r)
			q.dropIfIdleLocked(f)
		}
		q.mu.Unlock()
		return refusal
	}
	r.waited = true
	if f.tail == nil {
		f.head = r
	} else {
		f.tail.qnext = r
	}
	f.tail = r
	f.queued++
	q.queued++
	if f.queued == 1 { // joins the ring last: before the flow served next
		if q.ring == nil {
			f.next, f.prev = f, f
			q.ring = f
		} else {
			f.next, f.prev = q.ring, q.ring.prev
			q.ring.prev.next = f
			q.ring.prev = f
		}
	}
	q.mu.Unlock()
	return nil
}

// tryAcquire takes a worker for a job that does not queue, reporting
// false when none is free or requests are waiting for one; the job then
// starts on the pool (its worker takes the next waiting request when it
// ends: Server.work), or gives the worker back (unacquire).
func (q *scheduler) tryAcquire() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued > 0 || q.running >= q.workers {
		return false
	}
	q.running++
	return true
}

// unacquire gives back a worker tryAcquire took for a job that did not
// start.
func (q *scheduler) unacquire() {
	q.mu.Lock()
	q.running--
	q.mu.Unlock()
}

// next is called by a worker that ended a job: it returns the next
// request to serve on that worker, round robin over the keys with
// requests queued, or nil, and then the worker is free.
func (q *scheduler) next() *request {
	q.mu.Lock()
	defer q.mu.Unlock()
	f := q.ring
	if f == nil {
		q.running--
		return nil
	}
	r := f.head
	f.head = r.qnext
	r.qnext = nil
	if f.head == nil {
		f.tail = nil
	}
	f.queued--
	q.queued--
	if f.queued == 0 {
		if f.next == f {
			q.ring = nil
		} else {
			f.prev.next, f.next.prev = f.next, f.prev
			q.ring = f.next
		}
		f.next, f.prev = nil, nil
		q.dropIfIdleLocked(f)
	} else {
		q.ring = f.next
	}
	return r
}

// release ends r's count in its stateless client's flow (submit), once
// r is served, before its answer is sent.
func (q *scheduler) release(r *request) {
	if r.flow == nil {
		return
	}
	q.mu.Lock()
	q.releaseLocked(r)
	q.mu.Unlock()
}

func (q *scheduler) releaseLocked(r *request) {
	f := r.flow
	if f == nil {
		return
	}
	r.flow = nil
	f.inflight--
	q.dropIfIdleLocked(f)
}

// flowLocked returns the flow of key, made (from the free list) when it
// has none.
func (q *scheduler) flowLocked(key flowKey) *flow {
	if f, ok := q.flows[key]; ok {
		return f
	}
	f := q.free
	if f != nil {
		q.free = f.free
		f.free = nil
	} else {
		f = new(flow)
	}
	f.key = key
	q.flows[key] = f
	return f
}

// dropIfIdleLocked forgets f when it holds nothing: no request queued or
// admitted.
func (q *scheduler) dropIfIdleLocked(f *flow) {
	if f.queued > 0 || f.inflight > 0 {
		return
	}
	delete(q.flows, f.key)
	*f = flow{free: q.free}
	q.free = f
}

// keys returns the number of keys holding state (tests).
func (q *scheduler) keys() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.flows)
}
