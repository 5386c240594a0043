package loadtest

import (
	"context"
	"errors"
	"strconv"
)

// ErrorKind classifies a failed request. Every failure mcpload counts has
// exactly one kind.
type ErrorKind uint8

// The error kinds, in report order.
const (
	KindNone       ErrorKind = iota
	KindConnect              // the connection or the initialize handshake failed
	KindTimeout              // no answer within the request timeout
	KindClosed               // the server closed the connection with the request outstanding
	KindTransport            // an HTTP status other than 200 or 202, a write error, a wrong content type
	KindProtocol             // an answer that is not JSON-RPC 2.0
	KindIDMismatch           // an answer to an id that was not asked
	KindRPCError             // a JSON-RPC error answer
	KindUnexpected           // a result whose content is not what the request asked for
	numKinds
)

var kindNames = [numKinds]string{"", "connect", "timeout", "closed", "transport", "protocol", "id_mismatch", "rpc_error", "unexpected"}

// String returns the kind's report name ("timeout", "id_mismatch", ...).
func (k ErrorKind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "kind" + strconv.Itoa(int(k))
}

// Kinds lists every error kind, in report order.
func Kinds() []ErrorKind {
	ks := make([]ErrorKind, 0, numKinds-1)
	for k := KindConnect; k < numKinds; k++ {
		ks = append(ks, k)
	}
	return ks
}

// Error is a failed request or connection: its kind and what happened.
type Error struct {
	Kind ErrorKind
	// Code is the JSON-RPC error code for KindRPCError, the HTTP status for
	// KindTransport when there was one.
	Code int
	Msg  string
	Err  error // the cause, if any
}

// Error returns "loadtest: KIND [CODE]: message: cause".
func (e *Error) Error() string {
	s := "loadtest: " + e.Kind.String()
	if e.Code != 0 {
		s += " " + strconv.Itoa(e.Code)
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Sentinel errors.
var (
	// ErrTimeout is the cause of a KindTimeout error.
	ErrTimeout = errors.New("loadtest: request timed out")
	// ErrClosed is the cause of KindClosed errors: the connection ended.
	ErrClosed = errors.New("loadtest: connection closed")
	// ErrConfig reports an invalid Config or Scenario.
	ErrConfig = errors.New("loadtest: invalid configuration")
)

// KindOf returns the kind of err: an *Error's own, KindTimeout for a
// deadline, KindClosed for ErrClosed, KindTransport otherwise.
func KindOf(err error) ErrorKind {
	if err == nil {
		return KindNone
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrTimeout):
		return KindTimeout
	case errors.Is(err, ErrClosed):
		return KindClosed
	}
	return KindTransport
}
