package codec

import (
	"errors"
	"strconv"
)

// JSON-RPC 2.0 and MCP error codes.
const (
	CodeParseError           = -32700
	CodeInvalidRequest       = -32600
	CodeMethodNotFound       = -32601
	CodeInvalidParams        = -32602
	CodeInternalError        = -32603
	CodeResourceNotFound     = -32002 // MCP: resources/read of an unknown URI
	CodeURLElicitationNeeded = -32042 // MCP 2025-11-25: URLElicitationRequiredError
	CodeServerBusy           = -32000 // implementation-defined: worker pool saturated
	CodeRequestCancelled     = -32800 // implementation-defined: request was cancelled
	CodeRequestTimeout       = -32001 // implementation-defined: request timed out
)

// Error is a JSON-RPC error object. It implements error so handlers can
// return one to control the code, message and data of the answer; any other
// error a handler returns becomes CodeInternalError.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	// Data is raw JSON, or nil.
	Data RawJSON `json:"data,omitempty"`
}

func (e *Error) Error() string {
	return "jsonrpc error " + strconv.Itoa(e.Code) + ": " + e.Message
}

// NewError returns an *Error with the given code and message.
func NewError(code int, msg string) *Error { return &Error{Code: code, Message: msg} }

// AsError returns err as an *Error: itself if it is (or wraps) one, else an
// internal error carrying err's text.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternalError, Message: err.Error()}
}

// RawJSON is a raw, already-encoded JSON value that is copied when decoded
// (unlike the aliasing fields of Message).
type RawJSON []byte

// MarshalJSON returns r, or null when r is empty.
func (r RawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// UnmarshalJSON stores a copy of data.
func (r *RawJSON) UnmarshalJSON(data []byte) error {
	*r = append((*r)[:0], data...)
	return nil
}
