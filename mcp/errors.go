package mcp

import "github.com/mcpedge/mcpedge/codec"

// URLElicitationRequired returns the error a handler returns when the user
// must first complete URL-mode elicitations (2025-11-25, code -32042): the
// client shows each URL, and the user retries once they are done.
func URLElicitationRequired(message string, elicitations ...ElicitParams) *codec.Error {
	for i := range elicitations {
		elicitations[i].Mode = "url"
	}
	if elicitations == nil {
		elicitations = []ElicitParams{}
	}
	data, err := codec.Marshal(struct {
		Elicitations []ElicitParams `json:"elicitations"`
	}{elicitations})
	if err != nil {
		return &codec.Error{Code: codec.CodeInternalError, Message: err.Error()}
	}
	if message == "" {
		message = "URL elicitation required"
	}
	return &codec.Error{Code: codec.CodeURLElicitationNeeded, Message: message, Data: data}
}
