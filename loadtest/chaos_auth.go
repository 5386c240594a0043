package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/nats-io/nats.go"
)

// Hostile clients of authorization: unauth (requests without a valid
// token) and nats_local (a local process on a cluster node's NATS port).

// codeUnauthorized is mcpedge's JSON-RPC error for a request without a
// valid token (auth.CodeUnauthorized).
const codeUnauthorized = -31001

// wrongToken is the token unauth presents in its even episodes.
const wrongToken = "chaos-not-a-token"

// unauthRequests are what unauth sends: the 2026-07-28 requests the engine
// answers itself (issue 20: they were answered without a token on TCP),
// some it passes to handlers, and, on TCP, initialize last (which opens a
// session of the older revisions when it succeeds).
var unauthRequests = []struct{ method, fields, name string }{
	{mcp.MethodServerDiscover, "", ""},
	{mcp.MethodToolsList, "", ""},
	{mcp.MethodResourcesList, "", ""},
	{mcp.MethodResourcesTemplatesList, "", ""},
	{mcp.MethodPromptsList, "", ""},
	{mcp.MethodSubscriptionsListen, `"notifications":{"toolsListChanged":true,"resourceSubscriptions":["mem://board/chaos"]}`, ""},
	{mcp.MethodTasksGet, `"taskId":"chaos"`, "chaos"},
	{mcp.MethodTasksCancel, `"taskId":"chaos"`, "chaos"},
	{mcp.MethodToolsCall, `"name":"echo","arguments":{"text":"x"}`, "echo"},
	{mcp.MethodResourcesRead, `"uri":"mem://hello"`, "mem://hello"},
	{mcp.MethodPromptsGet, `"name":"greet","arguments":{"name":"x"}`, "greet"},
}

// unauthMeta is the _meta of an unauth request: no token, or a wrong one.
func unauthMeta(withToken bool) string {
	if !withToken {
		return modernMeta
	}
	return strings.TrimSuffix(modernMeta, "}") + `,"io.mcpedge/token":"` + wrongToken + `"}`
}

// unauth is an unauth episode: no token in odd episodes, a wrong one in
// even ones.
func (cr *chaosRun) unauth(ctx context.Context, _, n int, rec *kindRec) {
	withToken := n%2 == 0
	if cr.cfg.Target.Transport == "http" {
		cr.httpUnauth(ctx, withToken, rec)
		return
	}
	rc, err := cr.dialRaw(ctx)
	if err != nil {
		cr.dialFailed(ctx, rec, err)
		return
	}
	defer rc.c.Close()
	rec = cr.onConn(rec, rc)
	meta := unauthMeta(withToken)
	var all []byte
	methods := map[string]string{} // id → method
	for i, r := range unauthRequests {
		id := strconv.Itoa(i + 1)
		methods[id] = r.method
		all = append(all, modernRequest(id, r.method, r.fields, meta)...)
		all = append(all, '\n')
	}
	initID := strconv.Itoa(len(unauthRequests) + 1)
	methods[initID] = mcp.MethodInitialize
	init := `{"protocolVersion":"` + protocolVersion + `","capabilities":{},"clientInfo":{"name":"mcpload","version":"1"}`
	if withToken {
		init += `,"_meta":{"io.mcpedge/token":"` + wrongToken + `"}`
	}
	all = codec.AppendRequest(all, []byte(initID), mcp.MethodInitialize, []byte(init+"}"))
	all = append(all, '\n')
	if err := rc.write(all, cr.deadline(cr.e.AnswerWithin)); err != nil {
		cr.rawWriteFailed(rc, rec, err)
		return
	}
	var served []string
	var msg codec.Message
	for decided := 0; decided < len(methods); {
		if _, err := rc.readMsg(cr.deadline(cr.e.AnswerWithin), &msg); err != nil {
			if len(served) > 0 {
				break // what was served without a token, whatever cut the rest
			}
			cr.readFailed(rec, err, fmt.Sprintf("%d answers of %d", len(methods)-decided, len(methods)))
			return
		}
		switch {
		case msg.Kind == codec.KindNotification && msg.Method == mcp.NotificationSubscriptionsAcked:
			decided++ // the listen, acknowledged: served
			served = append(served, mcp.MethodSubscriptionsListen)
		case msg.Kind == codec.KindError && errorCode(&msg) == codeUnauthorized:
			decided++
			rec.answer("refused", 1)
		case msg.Kind == codec.KindResponse || msg.Kind == codec.KindError:
			decided++
			served = append(served, methods[string(msg.ID)]+" "+answerName(&msg))
		}
	}
	cr.unauthVerdict(rec, served, withToken)
}

func (cr *chaosRun) unauthVerdict(rec *kindRec, served []string, withToken bool) {
	tok := "no_token"
	if withToken {
		tok = "wrong_token"
	}
	if len(served) > 0 {
		for _, s := range served {
			rec.answer("served_"+strings.Fields(s)[0], 1)
		}
		rec.judged("served_"+tok, unexpected, 0, fmt.Sprintf("answered without a valid token: %s", strings.Join(served, ", ")))
		return
	}
	rec.record("all_refused_"+tok, asExpected, 0, "")
}

// httpUnauth POSTs each request stateless, without Authorization or with
// a wrong bearer token: each must be answered 401.
func (cr *chaosRun) httpUnauth(ctx context.Context, withToken bool, rec *kindRec) {
	var h http.Header
	if withToken {
		h = http.Header{"Authorization": {"Bearer " + wrongToken}}
	}
	var served []string
	for i, r := range unauthRequests {
		ectx, cancel := context.WithDeadline(ctx, cr.deadline(cr.e.AnswerWithin))
		resp, err := cr.postModern(ectx, cr.kc, r.method, r.name, modernRequest(strconv.Itoa(i+1), r.method, r.fields, modernMeta), h)
		if err != nil {
			cancel()
			if len(served) > 0 {
				break // what was served without a token, whatever cut the rest
			}
			cr.httpFailed(ctx, rec, err)
			return
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		cancel()
		if resp.StatusCode == http.StatusUnauthorized {
			rec.answer("refused", 1)
		} else {
			served = append(served, r.method+" status_"+strconv.Itoa(resp.StatusCode))
		}
	}
	cr.unauthVerdict(rec, served, withToken)
}

// natsAttempts are the ways in a local process tries: none, the route
// user (mcpedge) with a guessed password, a guessed token.
var natsAttempts = []struct {
	name string
	opts []nats.Option
}{
	{"no_credentials", nil},
	{"route_user", []nats.Option{nats.UserInfo("mcpedge", "guess")}},
	{"token", []nats.Option{nats.Token("guess")}},
}

// natsLocal is a nats_local episode: one attempt, in turn.
func (cr *chaosRun) natsLocal(ctx context.Context, _, n int, rec *kindRec) {
	a := natsAttempts[n%len(natsAttempts)]
	opts := append([]nats.Option{nats.NoReconnect(), nats.Timeout(cr.e.AnswerWithin), nats.Name("mcpload chaos")}, a.opts...)
	nc, err := nats.Connect(cr.e.NATSURL, opts...)
	switch {
	case err == nil:
		defer nc.Close()
		// In: what could it read? Subscribe to everything and wait a
		// moment for anything the cluster carries.
		what := "it connected"
		if sub, serr := nc.SubscribeSync(">"); serr == nil {
			if m, merr := sub.NextMsg(min(time.Second, max(time.Until(cr.end), time.Millisecond))); merr == nil {
				what += " and read a message on " + m.Subject
			} else {
				what += " and subscribed to everything"
			}
		}
		rec.judged("connected_"+a.name, unexpected, 0, what)
	case errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization"):
		rec.record("refused_"+a.name, asExpected, 0, "")
	case errors.Is(err, nats.ErrNoServers) || errors.Is(err, syscall.ECONNREFUSED):
		rec.record("no_port", asExpected, 0, "")
	case ctx.Err() != nil || cr.ended():
		rec.record("run_ended", undecided, 0, "")
	default:
		rec.record("failed", unexpected, 0, err.Error())
	}
}
