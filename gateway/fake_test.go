package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// serveFake is a scripted upstream for the bad-input tests: a stdio MCP
// server whose tools misbehave on purpose.
//
//	echo         answers {"content":[{"type":"text","text":ARGS}]}
//	crash        exits mid-call
//	hang         never answers
//	garbage      writes a line that is not JSON, then an invalid answer to the call
//	wrongid      answers an id it was never sent, then the call
//	big          answers with a message of 2 MiB
//	flood        sends 3000 log notifications, then answers
//	progress     sends progress against the call's token, then answers
//	elicit-gone  asks an elicitation for a request that is not in flight, and answers what it got
//	elicit       asks an elicitation (linked to the call), and answers what it got
//	log          sends a log message linked to the call, then answers
//	cancelled    answers how many notifications/cancelled it received
//	rpcerror     answers a JSON-RPC error of its own
//	roots        answers the roots it got by asking roots/list on its own,
//	             after a notifications/roots/list_changed (waits for them)
func serveFake() {
	var (
		wmu       sync.Mutex
		out       = bufio.NewWriter(os.Stdout)
		cancelled atomic.Int64
		nextID    atomic.Int64
		pendMu    sync.Mutex
		pending   = map[string]chan json.RawMessage{}
	)
	write := func(s string) {
		wmu.Lock()
		out.WriteString(s)
		out.WriteByte('\n')
		out.Flush()
		wmu.Unlock()
	}
	result := func(id json.RawMessage, res string) {
		write(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + res + `}`)
	}
	text := func(id json.RawMessage, s string) {
		b, _ := json.Marshal(s)
		result(id, `{"content":[{"type":"text","text":`+string(b)+`}]}`)
	}
	ask := func(method, params string) json.RawMessage {
		id := "\"f" + strconv.FormatInt(nextID.Add(1), 10) + "\""
		ch := make(chan json.RawMessage, 1)
		pendMu.Lock()
		pending[id] = ch
		pendMu.Unlock()
		write(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`)
		select {
		case r := <-ch:
			return r
		case <-time.After(10 * time.Second):
			return json.RawMessage(`"timeout"`)
		}
	}
	gotRoots := make(chan json.RawMessage, 1)
	tools := []string{"echo", "crash", "hang", "garbage", "wrongid", "big", "flood", "progress", "elicit-gone", "elicit", "log", "cancelled", "rpcerror", "roots"}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		if m.Method == "" { // an answer to one of ours
			pendMu.Lock()
			ch := pending[string(m.ID)]
			delete(pending, string(m.ID))
			pendMu.Unlock()
			if ch != nil {
				if m.Error != nil {
					ch <- m.Error
				} else {
					ch <- m.Result
				}
			}
			continue
		}
		switch m.Method {
		case "initialize":
			result(m.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"fake","version":"1"},"instructions":"Call echo to hear yourself."}`)
		case "server/discover":
			write(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"method not found"}}`)
		case "notifications/initialized", "logging/setLevel":
			if m.ID != nil {
				result(m.ID, `{}`)
			}
		case "notifications/cancelled":
			cancelled.Add(1)
		case "notifications/roots/list_changed":
			go func() { gotRoots <- ask("roots/list", `{}`) }()
		case "ping":
			result(m.ID, `{}`)
		case "tools/list":
			var b strings.Builder
			b.WriteString(`{"tools":[`)
			for i, t := range tools {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"name":%q,"inputSchema":{"type":"object"}}`, t)
			}
			b.WriteString(`]}`)
			result(m.ID, b.String())
		case "tools/call":
			var p struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
				Meta      struct {
					Token json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			}
			_ = json.Unmarshal(m.Params, &p)
			id := m.ID
			switch p.Name {
			case "echo":
				text(id, string(p.Arguments))
			case "crash":
				os.Exit(3)
			case "hang":
			case "garbage":
				write(`this is not JSON`)
				write(`{"jsonrpc":"1.0","id":` + string(id) + `,"result":{}}`)
			case "wrongid":
				write(`{"jsonrpc":"2.0","id":987654321987,"result":{"content":[]}}`)
				text(id, "right")
			case "big":
				text(id, strings.Repeat("x", 2<<20))
			case "flood":
				for i := range 3000 {
					write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":` + strconv.Itoa(i) + `}}`)
				}
				text(id, "flooded")
			case "progress":
				if p.Meta.Token != nil {
					write(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(p.Meta.Token) + `,"progress":1,"total":2,"message":"half"}}`)
				}
				text(id, "token "+string(p.Meta.Token))
			case "elicit-gone", "elicit":
				link := id
				if p.Name == "elicit-gone" {
					link = json.RawMessage(`424242`)
				}
				go func() {
					r := ask("elicitation/create", `{"message":"name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}},"_meta":{"io.github.mcpedge/related-request":{"requestId":`+string(link)+`}}}`)
					text(id, string(r))
				}()
			case "log":
				write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","logger":"fake","data":"hello","_meta":{"io.github.mcpedge/related-request":{"requestId":` + string(id) + `}}}}`)
				text(id, "logged")
			case "cancelled":
				text(id, strconv.FormatInt(cancelled.Load(), 10))
			case "roots":
				go func() {
					select {
					case r := <-gotRoots:
						text(id, string(r))
					case <-time.After(10 * time.Second):
						text(id, "no roots")
					}
				}()
			case "rpcerror":
				write(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32000,"message":"the fake refuses"}}`)
			default:
				write(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32602,"message":"unknown tool"}}`)
			}
		default:
			if m.ID != nil {
				write(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"method not found"}}`)
			}
		}
	}
}

// serveFake26 is a scripted upstream of 2026-07-28 only, whose tools
// misbehave on purpose:
//
//	ask     asks for an elicitation whatever the client declared
//	rounds  asks for input again on every retry
func serveFake26() {
	out := bufio.NewWriter(os.Stdout)
	write := func(s string) {
		out.WriteString(s)
		out.WriteByte('\n')
		out.Flush()
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name         string `json:"name"`
				RequestState string `json:"requestState"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &m) != nil || m.ID == nil {
			continue
		}
		result := func(res string) { write(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + res + `}`) }
		switch m.Method {
		case "server/discover":
			result(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public"}`)
		case "subscriptions/listen":
			write(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":` + string(m.ID) + `},"notifications":{}}}`)
		case "tools/list":
			result(`{"resultType":"complete","tools":[{"name":"ask","inputSchema":{"type":"object"}},{"name":"rounds","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			ask := `{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}}},"requestState":"s` + strconv.Itoa(len(m.Params.RequestState)) + `"}`
			if m.Params.Name == "ask" && m.Params.RequestState != "" {
				result(`{"resultType":"complete","content":[{"type":"text","text":"answered"}]}`)
				continue
			}
			result(ask)
		default:
			write(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"method not found"}}`)
		}
	}
}
