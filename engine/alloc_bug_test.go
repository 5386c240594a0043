//go:build !race

package engine_test

import "testing"

// TestHandleFrameToolsListZeroAlloc: a cached tools/list dispatched from
// the event loop must not allocate. It fails while Server.listPage
// (engine/dispatch.go) declares its params struct outside the branch that
// decodes it: &p goes to codec.UnmarshalNoCopy as an interface, so p moves
// to the heap on every call, params or not.
func TestHandleFrameToolsListZeroAlloc(t *testing.T) {
	assertZeroAllocFrames(t, []frameCase{
		{"tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"tools/list string id", `{"jsonrpc":"2.0","id":"abc-123","method":"tools/list"}`},
		{"prompts/list", `{"jsonrpc":"2.0","id":3,"method":"prompts/list"}`},
	})
}
