package engine

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/session"
)

// The limits a request can be refused by, as LimitError.Limit and the
// "limit" member of the error's data.
const (
	LimitRate        = "rate"         // the session's requests per second (Options.Rate)
	LimitRateIP      = "rate-ip"      // the client address's requests per second (Options.RateIP)
	LimitRateSubject = "rate-subject" // the client's requests per second, cluster-wide (Options.RateSubject)
	LimitInflight    = "max-inflight" // the session's requests in flight (Options.MaxInflight)
	// LimitQueue: the client's queue of requests waiting for a worker is
	// full (Options.QueuePerClient).
	LimitQueue = "queue"
	// LimitWorkers: every worker is busy and every queue together holds
	// as many requests as it may (Options.Workers, Options.QueueTotal).
	LimitWorkers      = "workers"
	LimitShutdown     = "shutdown"          // the server is draining
	LimitToolRate     = "tool-rate"         // the tool's calls per second, cluster-wide (ToolLimits.Rate)
	LimitToolInflight = "tool-max-inflight" // the tool's calls in flight (ToolLimits.MaxInflight)
	// LimitSubscriptions: the session's resource subscriptions and
	// subscriptions/listen URIs (Options.MaxSubscriptions).
	LimitSubscriptions = "subscriptions"
	// LimitTasks: the client's share of tasks is full of running ones
	// (Options.MaxTasksPerClient).
	LimitTasks = "tasks"
	// LimitTaskWorkers: every worker tasks may hold runs one
	// (Options.TaskWorkers), or the server keeps all the tasks it may
	// (Options.MaxTasks), none of them ended.
	LimitTaskWorkers = "task-workers"
)

// LimitError is the reason a request was refused before any handler ran.
// It is answered with JSON-RPC error CodeServerBusy (-32000) whose data is
// {"limit": Limit, "retryAfterMs": RetryAfter}; a reply sink that is a
// Refuser answers it in its own terms (HTTP 429 or 503 with Retry-After).
type LimitError struct {
	Limit      string        // one of the Limit* names
	RetryAfter time.Duration // when a retry may succeed; 0 when unknown
}

func (e *LimitError) Error() string { return "engine: limit reached: " + e.Limit }

// message is the JSON-RPC error message of the refusal.
func (e *LimitError) message() string {
	switch e.Limit {
	case LimitRate:
		return "server busy: session request rate over the limit"
	case LimitRateIP:
		return "server busy: request rate from this address over the limit"
	case LimitRateSubject:
		return "server busy: request rate of this client over the limit"
	case LimitInflight:
		return "server busy: too many requests in flight on this session"
	case LimitQueue:
		return "server busy: too many requests of this client waiting for a worker"
	case LimitWorkers:
		return "server busy: worker pool and queues full"
	case LimitToolRate:
		return "server busy: call rate of this tool over the limit"
	case LimitToolInflight:
		return "server busy: too many calls of this tool in flight"
	case LimitShutdown:
		return "server shutting down"
	case LimitSubscriptions:
		return "server busy: too many subscriptions on this session"
	case LimitTasks:
		return "server busy: too many tasks running for this client"
	case LimitTaskWorkers:
		return "server busy: every worker tasks may use is running one"
	}
	return "server busy"
}

// ClientShare reports whether the limit is the client's own share (its
// rates, its requests in flight or queued, its subscriptions, its tasks)
// or a tool's rate, which it can wait out, rather than the server's
// capacity (a full pool and queues, a tool's calls in flight, a drain):
// Streamable HTTP answers the first with 429 and the second with 503.
func (e *LimitError) ClientShare() bool {
	switch e.Limit {
	case LimitRate, LimitRateIP, LimitRateSubject, LimitInflight, LimitQueue, LimitToolRate, LimitTasks, LimitSubscriptions:
		return true
	}
	return false
}

// appendData appends the error's data object to dst.
func (e *LimitError) appendData(dst []byte) []byte {
	dst = append(dst, `{"limit":"`...)
	dst = append(dst, e.Limit...)
	dst = append(dst, '"')
	if e.RetryAfter > 0 {
		dst = append(dst, `,"retryAfterMs":`...)
		dst = strconv.AppendInt(dst, max(e.RetryAfter.Milliseconds(), 1), 10)
	}
	return append(dst, '}')
}

// AppendAnswer appends the JSON-RPC error answering request id.
func (e *LimitError) AppendAnswer(dst, id []byte) []byte {
	var data [64]byte
	return codec.AppendError(dst, id, codec.CodeServerBusy, e.message(), e.appendData(data[:0]))
}

// A Refuser is a reply Sink that answers a refused request itself, in its
// transport's terms, instead of being sent the JSON-RPC error. Streamable
// HTTP answers a POST refused for its rate with 429 and one refused because
// the server is full with 503, both with Retry-After.
type Refuser interface {
	session.Sink
	Refuse(id []byte, err *LimitError)
}

// refuse answers request id with err: through reply when it is a
// Refuser, else appended to out, which it returns.
func refuse(out []byte, reply session.Sink, id []byte, err *LimitError) []byte {
	if r, ok := reply.(Refuser); ok {
		r.Refuse(id, err)
		return out
	}
	return err.AppendAnswer(out, id)
}

// The fixed refusals, shared: they carry no per-request state.
var (
	errInflight     = &LimitError{Limit: LimitInflight, RetryAfter: 100 * time.Millisecond}
	errWorkers      = &LimitError{Limit: LimitWorkers, RetryAfter: 100 * time.Millisecond}
	errQueue        = &LimitError{Limit: LimitQueue, RetryAfter: 100 * time.Millisecond}
	errToolInflight = &LimitError{Limit: LimitToolInflight, RetryAfter: 100 * time.Millisecond}
	errShutdown     = &LimitError{Limit: LimitShutdown}
	errTasks        = &LimitError{Limit: LimitTasks, RetryAfter: time.Second}
	errTaskWorkers  = &LimitError{Limit: LimitTaskWorkers, RetryAfter: time.Second}
	errSubs         = &LimitError{Limit: LimitSubscriptions}
)

// admission counts the requests being served and refuses new ones once
// closing begins, in one atomic step: the closing bit and the count share a
// word, so no request can slip in between the check and the count while
// Shutdown waits for the count to reach zero.
type admission struct {
	state   atomic.Int64 // closingBit | count
	once    sync.Once
	drained chan struct{}
}

const closingBit = int64(1) << 62

func newAdmission() *admission { return &admission{drained: make(chan struct{})} }

// admit counts a new request, or reports false once closing has begun.
func (a *admission) admit() bool {
	for {
		v := a.state.Load()
		if v&closingBit != 0 {
			return false
		}
		if a.state.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

// done ends an admitted request.
func (a *admission) done() {
	if a.state.Add(-1) == closingBit {
		a.once.Do(func() { close(a.drained) })
	}
}

// close refuses new requests and returns a channel closed once every
// admitted request is done.
func (a *admission) close() <-chan struct{} {
	if a.state.Or(closingBit)|closingBit == closingBit {
		a.once.Do(func() { close(a.drained) })
	}
	return a.drained
}

func (a *admission) closing() bool { return a.state.Load()&closingBit != 0 }
