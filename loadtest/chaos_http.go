package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
)

// HTTP variants. They use net/http without keep-alive, a connection per
// request, but for half_sent and no_read, which drive a connection of
// their own by hand.

func (cr *chaosRun) post(ctx context.Context, body io.Reader, sid string) (*http.Response, error) {
	return cr.postWith(ctx, cr.hc, body, sid)
}

// postWith POSTs body on session sid (none: "") with client hc.
func (cr *chaosRun) postWith(ctx context.Context, hc *http.Client, body io.Reader, sid string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cr.cfg.Target.Addr, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set(hSession, sid)
		req.Header.Set(hVersion, protocolVersion)
	}
	return hc.Do(req)
}

// initRefused is an initialize answered with another status than 200.
type initRefused struct {
	status     int
	retryAfter string
}

func (e *initRefused) Error() string {
	return "initialize answered " + strconv.Itoa(e.status) + " " + http.StatusText(e.status)
}

// limited reports a refusal by a session limit: 429 (the address's share)
// or 503 (the table), with Retry-After.
func (e *initRefused) limited() bool {
	return (e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable) && e.retryAfter != ""
}

// httpInit posts initialize and returns the session id.
func (cr *chaosRun) httpInit(ctx context.Context, hc *http.Client) (string, error) {
	resp, err := cr.postWith(ctx, hc, bytes.NewReader(codec.AppendRequest(nil, []byte("0"), "initialize", []byte(initParams))), "")
	if err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", &initRefused{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	}
	return resp.Header.Get(hSession), nil
}

// httpSession opens a session that is ready for requests: initialize, then
// notifications/initialized.
func (cr *chaosRun) httpSession(ctx context.Context, hc *http.Client) (string, error) {
	began := time.Now()
	sid, err := cr.httpInit(ctx, hc)
	if err != nil {
		return "", err
	}
	if sid == "" {
		return "", errors.New("initialize answered without " + hSession)
	}
	resp, err := cr.postWith(ctx, hc, bytes.NewReader(codec.AppendNotification(nil, "notifications/initialized", nil)), sid)
	if err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusAccepted, http.StatusOK:
		return sid, nil
	case http.StatusNotFound:
		return "", &sessionGone{what: "notifications/initialized", after: time.Since(began)}
	}
	return "", fmt.Errorf("notifications/initialized answered %s", resp.Status)
}

// sessionGone is a session found gone (404) at its client's first
// request after initialize, after the time since the initialize was sent.
type sessionGone struct {
	what  string
	after time.Duration
}

func (e *sessionGone) Error() string {
	return e.what + " answered 404 Not Found " + e.after.Round(time.Millisecond).String() + " after the initialize"
}

// goneVerdict judges a new session found gone at its first request: the
// server reaps a session whose client sends nothing for InitTimeout after
// initialize, and the server's clock began after the client sent it, so
// a 404 that came at least InitTimeout after it is that (a slow client
// machine, an answer the spec gives for a session that ended): undecided.
// Sooner, or with no InitTimeout known, the session was lost.
func (cr *chaosRun) goneVerdict(g *sessionGone) (string, verdict, string) {
	if cr.e.InitTimeout > 0 && g.after >= cr.e.InitTimeout {
		return "reaped_before_use", undecided, ""
	}
	return "session_gone", unexpected, g.Error() + fmt.Sprintf(" (the init timeout is %s)", cr.e.InitTimeout)
}

// httpInitFailed records an episode whose session could not be opened:
// undecided when a session limit refused it (session_flood may hold the
// address's share) or the session was reaped before its first request
// (goneVerdict), as httpFailed says otherwise.
func (cr *chaosRun) httpInitFailed(ctx context.Context, rec *kindRec, err error) {
	var r *initRefused
	var g *sessionGone
	switch {
	case errors.As(err, &r) && r.limited():
		rec.record("initialize_refused_"+strconv.Itoa(r.status), undecided, 0, "")
	case errors.As(err, &g):
		outcome, v, detail := cr.goneVerdict(g)
		rec.record(outcome, v, 0, detail)
	default:
		cr.httpFailed(ctx, rec, err)
	}
}

// httpDelete ends a session, best effort, even once the run has ended.
func (cr *chaosRun) httpDelete(sid string) { cr.httpDeleteWith(cr.hc, sid) }

func (cr *chaosRun) httpDeleteWith(hc *http.Client, sid string) {
	ctx, cancel := context.WithTimeout(context.Background(), cr.e.AnswerWithin)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, cr.cfg.Target.Addr, nil)
	if err != nil {
		return
	}
	req.Header.Set(hSession, sid)
	req.Header.Set(hVersion, protocolVersion)
	if resp, err := hc.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	}
}

// httpAnswer is what a POST of one request got back.
type httpAnswer struct {
	status     int
	retryAfter string
	// answer names the JSON-RPC answer to the request ("result",
	// "error_-32000"), from the JSON body or the SSE stream's events; ""
	// when there was none.
	answer string
	body   []byte
}

// httpCall POSTs one request with id on session sid and reads its answer.
func (cr *chaosRun) httpCall(ctx context.Context, sid string, body []byte, id string) (httpAnswer, error) {
	return cr.httpCallWith(ctx, cr.hc, sid, body, id)
}

// httpCallWith is httpCall with client hc.
func (cr *chaosRun) httpCallWith(ctx context.Context, hc *http.Client, sid string, body []byte, id string) (httpAnswer, error) {
	resp, err := cr.postWith(ctx, hc, bytes.NewReader(body), sid)
	if err != nil {
		return httpAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	a := httpAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: b}
	if err != nil {
		if isClose(err) && resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			// An event stream the server closed before its answer: on
			// HTTP a cut over the shared outbound budget (or the write
			// timeout) comes without a notice, and only a stream with
			// bytes waiting is cut so.
			return a, &serverCut{limit: cutStreamClosed, at: time.Now()}
		}
		return a, err
	}
	a.answer = findAnswer(resp.Header.Get("Content-Type"), b, id)
	return a, nil
}

// findAnswer returns the name of the JSON-RPC answer to id in body, a JSON
// message or an SSE stream, or "".
func findAnswer(contentType string, body []byte, id string) string {
	var msg codec.Message
	name := func(data []byte) string {
		if codec.Decode(data, &msg) != nil || (msg.Kind != codec.KindResponse && msg.Kind != codec.KindError) {
			return ""
		}
		if string(msg.ID) != id && !(msg.Kind == codec.KindError && len(msg.ID) == 0) {
			return ""
		}
		return answerName(&msg)
	}
	if !strings.HasPrefix(contentType, "text/event-stream") {
		return name(bytes.TrimSpace(body))
	}
	var p codec.SSEParser
	p.MaxSize = 4 << 20
	for len(body) > 0 {
		ev, n, ok, err := p.Next(body)
		if err != nil || n == 0 {
			return ""
		}
		body = body[n:]
		if !ok || len(ev.Data) == 0 {
			continue
		}
		if a := name(ev.Data); a != "" {
			return a
		}
	}
	return ""
}

// httpBadUTF8 POSTs the requests with invalid UTF-8, the ping last, on
// session sid: each must be answered 200 with its JSON-RPC answer (or
// refused busy, 503 or 429, when the worker pool is full), the ping with a
// result (the session still works).
func (cr *chaosRun) httpBadUTF8(ctx, runCtx context.Context, sid string, rec *kindRec) {
	for i, r := range badUTF8Requests {
		a, err := cr.httpCall(ctx, sid, bytes.TrimSuffix(r, []byte("\n")), strconv.Itoa(i+1))
		switch {
		case err != nil:
			cr.httpFailed(runCtx, rec, fmt.Errorf("request %d of %d: %w", i+1, len(badUTF8Requests), err))
			return
		case (a.status == http.StatusServiceUnavailable || a.status == http.StatusTooManyRequests) && a.answer == "error_-32000":
			// A server whose workers the floods keep busy refuses the
			// calls it must queue: a well-formed answer too.
			rec.answer("busy", 1)
			continue
		case a.status != http.StatusOK:
			rec.judged(fmt.Sprintf("status_%d", a.status), unexpected, 0, fmt.Sprintf("request %d of %d: %s", i+1, len(badUTF8Requests), clip(a.body)))
			return
		case a.answer == "":
			rec.judged("no_answer", unexpected, 0, fmt.Sprintf("request %d of %d: %s", i+1, len(badUTF8Requests), clip(a.body)))
			return
		}
		rec.answer(a.answer, 1)
		if i == len(badUTF8Requests)-1 && a.answer != "result" {
			rec.judged("ping_failed", unexpected, 0, "the ping after them: "+clip(a.body))
			return
		}
	}
	rec.record("answered", asExpected, 0, "")
}

// dialHTTP opens a connection of its own to the HTTP target.
func (cr *chaosRun) dialHTTP(ctx context.Context) (net.Conn, error) {
	return cr.dialHTTPWith(ctx, &net.Dialer{})
}

func (cr *chaosRun) dialHTTPWith(ctx context.Context, d *net.Dialer) (net.Conn, error) {
	host := cr.url.Host
	if cr.url.Port() == "" {
		host = net.JoinHostPort(cr.url.Hostname(), "80")
	}
	dctx, cancel := context.WithTimeout(ctx, cr.timeout)
	defer cancel()
	return d.DialContext(dctx, "tcp", host)
}

// appendPostHead appends the head of a POST of n bytes on session sid
// (none: "").
func (cr *chaosRun) appendPostHead(dst []byte, sid string, n int) []byte {
	dst = append(dst, "POST "...)
	dst = append(dst, cr.url.RequestURI()...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, cr.url.Host...)
	dst = append(dst, "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"...)
	if sid != "" {
		dst = append(dst, hSession+": "...)
		dst = append(dst, sid...)
		dst = append(dst, "\r\n"+hVersion+": "+protocolVersion+"\r\n"...)
	}
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, "\r\n\r\n"...)
}

// httpHalfSent sends the head of a POST and half its body on a connection
// of its own, falls silent and waits for the server to close it.
func (cr *chaosRun) httpHalfSent(ctx, runCtx context.Context, sid string, rec *kindRec) {
	c, err := cr.dialHTTP(ctx)
	if err != nil {
		cr.httpFailed(runCtx, rec, err)
		return
	}
	defer c.Close()
	n := min(32<<10, cr.e.MaxMessage)
	msg := cr.appendPostHead(nil, sid, n)
	head := len(msg)
	msg = append(msg, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`...)
	for len(msg)-head < n/2 {
		msg = append(msg, 'h')
	}
	_ = c.SetWriteDeadline(cr.deadline(cr.e.AnswerWithin))
	if _, err := c.Write(msg); err != nil {
		cr.writeFailed(rec, err)
		return
	}
	// 408 at the read timeout; 503 when the budget of bodies being
	// received (-max-buffered) cut it first.
	cr.awaitClose(c, time.Now(), rec, "the half body", func(code int) bool {
		return code == http.StatusRequestTimeout || code == http.StatusServiceUnavailable
	})
}

// awaitClose waits, up to ReadTimeout and Grace after sent, for the
// server to close c, reading what it says first: the close alone, or after
// a status that accept takes, is as expected.
func (cr *chaosRun) awaitClose(c net.Conn, sent time.Time, rec *kindRec, after string, accept func(code int) bool) {
	grace := cr.e.ReadTimeout + cr.e.Grace
	_ = c.SetReadDeadline(cr.deadline(grace))
	got, err := io.ReadAll(io.LimitReader(c, 64<<10))
	if err == nil {
		err = io.EOF // the limit: the server said a lot, then
	}
	took := time.Since(sent)
	status, code := "", 0
	if len(got) > 0 {
		status = "status_?"
		if f := bytes.Fields(got); len(f) > 1 && bytes.HasPrefix(f[0], []byte("HTTP/")) {
			status = "status_" + string(f[1])
			code, _ = strconv.Atoi(string(f[1]))
		}
	}
	switch {
	case isClose(err) && took <= grace && (status == "" || accept(code)):
		outcome := "closed"
		if status != "" {
			outcome = status + "+closed"
		}
		rec.record(outcome, asExpected, took, "")
	case isClose(err) && took <= grace:
		rec.judged(status+"+closed", unexpected, took, "answered after "+after+": "+clip(got))
	case isClose(err):
		rec.judged("closed_late", unexpected, took, "")
	case isTimeout(err) && cr.ended() && took < grace:
		rec.record("open_at_end", undecided, 0, "")
	case isTimeout(err):
		rec.judged("not_closed", unexpected, 0, "still open "+took.Round(time.Millisecond).String()+" after "+after)
	default:
		rec.record("failed", unexpected, 0, err.Error())
	}
}

// noReadAnswer is a low estimate of the bytes of the SSE stream that
// answers one no_read call of count (100 progress events, the result).
const noReadAnswer = 100 * 120

// httpNoRead pipelines count calls on a keep-alive connection of its own
// and reads nothing, until the server closes it or a write blocks past the
// write timeout.
func (cr *chaosRun) httpNoRead(ctx, runCtx context.Context, sid string, rec *kindRec) {
	c, err := cr.dialHTTPWith(ctx, deafDialer)
	if err != nil {
		cr.httpFailed(runCtx, rec, err)
		return
	}
	defer c.Close()
	pad := bytes.Repeat([]byte("p"), max(0, min(16<<10, cr.e.MaxMessage/2-256)))
	var body, req []byte
	started := time.Now()
	due := 0
	bound := cr.e.WriteTimeout + cr.e.Grace
	for id := 1; ; id++ {
		body = append(body[:0], `{"jsonrpc":"2.0","id":`...)
		body = strconv.AppendInt(body, int64(id), 10)
		body = append(body, `,"method":"tools/call","params":{"name":"count","arguments":{"n":100,"delayMs":0},"_meta":{"progressToken":`...)
		body = strconv.AppendInt(body, int64(id), 10)
		body = append(body, `,"pad":"`...)
		body = append(body, pad...)
		body = append(body, `"}}}`...)
		req = cr.appendPostHead(req[:0], sid, len(body))
		req = append(req, body...)
		_ = c.SetWriteDeadline(cr.deadline(bound))
		_, err := c.Write(req)
		switch {
		case err == nil:
			due += noReadAnswer
			if due > cr.e.SlowConsumerBytes {
				rec.judged("not_closed", unexpected, 0, fmt.Sprintf("%d calls (at least %d bytes of answers) due, unread, and the connection is open", id, due))
				return
			}
			continue
		case isClose(err):
			rec.record("closed", asExpected, time.Since(started), "")
		case isTimeout(err) && cr.ended():
			rec.record("run_ended", undecided, 0, "")
		case isTimeout(err):
			rec.judged("stalled", unexpected, 0, fmt.Sprintf("a write blocked %s after %d calls: the server stopped reading but kept the connection", bound, id-1))
		default:
			rec.record("failed", unexpected, 0, err.Error())
		}
		return
	}
}

// httpTally is what concurrent calls on a session got (httpConcurrent).
type httpTally struct {
	calls                                         int
	refused, served, failed, cuts, noRetry, other int
	results                                       int // served with a result, not an error
	firstErr                                      error
	firstCut                                      *serverCut
	firstOther                                    string
}

// httpConcurrent POSTs calls calls of FloodTool (FloodArgs, a progress
// token each) at once on session sid, each on a connection of its own,
// counts their answers by status and answer in rec, and tallies them:
// refused (429 or 503; noRetry of them without Retry-After), served (200
// with a JSON-RPC answer), failed (no answer), cut (by the read timeout,
// cutTransport) and other (flood, hog).
func (cr *chaosRun) httpConcurrent(ctx context.Context, sid string, calls int, rec *kindRec) httpTally {
	args, _ := compile(cr.e.FloodArgs)
	var v vars
	rng := rand64{s: uint64(time.Now().UnixNano())}
	type result struct {
		a   httpAnswer
		err error
	}
	results := make([]result, calls)
	var wg sync.WaitGroup
	var argsBuf []byte
	for i := range results {
		id := i + 1
		v.fill(&rng, 0, uint64(id))
		argsBuf = render(argsBuf[:0], args, &v)
		params := fmt.Appendf(nil, `{"name":%q,"arguments":%s,"_meta":{"progressToken":%d}}`, cr.e.FloodTool, argsBuf, id)
		body := codec.AppendRequest(nil, strconv.AppendInt(nil, int64(id), 10), "tools/call", params)
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := cr.httpCall(ctx, sid, body, strconv.Itoa(id))
			a.body = a.body[:min(len(a.body), 200)]
			results[i] = result{a, err}
		}()
	}
	wg.Wait()
	t := httpTally{calls: calls}
	for _, r := range results {
		var c *serverCut
		switch {
		case errors.As(r.err, &c):
			// Cut by the read timeout (cutTransport): no answer of the
			// server's to judge.
			t.cuts++
			if t.firstCut == nil {
				t.firstCut = c
			}
			continue
		case r.err != nil:
			t.failed++
			if t.firstErr == nil {
				t.firstErr = r.err
			}
			continue
		case r.a.status == http.StatusTooManyRequests || r.a.status == http.StatusServiceUnavailable:
			t.refused++
			if r.a.retryAfter == "" {
				t.noRetry++
			}
		case r.a.status == http.StatusOK && r.a.answer != "":
			t.served++
			if r.a.answer == "result" {
				t.results++
			}
		default:
			t.other++
			if t.firstOther == "" {
				t.firstOther = fmt.Sprintf("status %d: %s", r.a.status, clip(r.a.body))
			}
		}
		key := "status_" + strconv.Itoa(r.a.status)
		if r.a.answer != "" {
			key += "_" + r.a.answer
		}
		rec.answer(key, 1)
	}
	return t
}

// httpFlood POSTs FloodCalls calls of FloodTool at once on session sid.
func (cr *chaosRun) httpFlood(ctx, runCtx context.Context, sid string, rec *kindRec) {
	sent := time.Now()
	t := cr.httpConcurrent(ctx, sid, cr.e.FloodCalls, rec)
	// What the server answered wrong comes first; then calls that got no
	// answer; then the refusals the flood is for (calls cut by the read
	// timeout take nothing from those that came); then the cut.
	switch {
	case t.noRetry > 0:
		rec.judged("refused_without_retry_after", unexpected, 0, fmt.Sprintf("%d of %d refusals", t.noRetry, t.refused))
	case t.other > 0:
		rec.judged("bad_answer", unexpected, 0, fmt.Sprintf("%d of %d calls, the first %s", t.other, t.calls, t.firstOther))
	case t.failed > 0 && (runCtx.Err() != nil || cr.ended()):
		rec.record("run_ended", undecided, 0, "")
	case t.failed > 0:
		rec.judged("failed", unexpected, 0, fmt.Sprintf("%d of %d calls: %v", t.failed, t.calls, t.firstErr))
	case t.refused > 0:
		rec.record("busy", asExpected, time.Since(sent), "")
	case t.cuts > 0:
		outcome, v, detail := cutOutcome(t.firstCut)
		rec.record(outcome, v, 0, detail)
	default:
		rec.judged("all_served", unexpected, 0, fmt.Sprintf("%d concurrent calls, none refused", t.served))
	}
}

func (cr *chaosRun) httpAbandon(ctx context.Context, rec *kindRec) {
	ictx, cancel := context.WithTimeout(ctx, cr.timeout)
	defer cancel()
	if _, err := cr.httpInit(ictx, cr.hc); err != nil {
		var r *initRefused
		switch {
		case errors.As(err, &r) && r.limited():
			rec.record("initialize_refused_"+strconv.Itoa(r.status), undecided, 0, "")
		case cutLimit(err) != "":
			var c *serverCut
			errors.As(err, &c)
			outcome, v, detail := cutOutcome(c)
			rec.record(outcome, v, 0, detail)
		case ctx.Err() == nil && !cr.stopped():
			rec.record("initialize_failed", unexpected, 0, err.Error())
		}
		return
	}
	rec.record("abandoned", undecided, 0, "")
}

func (cr *chaosRun) httpEpisode(ctx context.Context, k ChaosKind, n int, rec *kindRec) {
	ectx, cancel := context.WithDeadline(ctx, cr.deadline(cr.timeout))
	defer cancel()
	switch k {
	case ChaosBadUTF8, ChaosHalfSent, ChaosNoRead, ChaosFlood:
		sid, err := cr.httpSession(ectx, cr.hc)
		if err != nil {
			cr.httpInitFailed(ctx, rec, err)
			return
		}
		defer cr.httpDelete(sid)
		switch k {
		case ChaosBadUTF8:
			cr.httpBadUTF8(ectx, ctx, sid, rec)
		case ChaosHalfSent:
			cr.httpHalfSent(ectx, ctx, sid, rec)
		case ChaosNoRead:
			cr.httpNoRead(ectx, ctx, sid, rec)
		case ChaosFlood:
			cr.httpFlood(ectx, ctx, sid, rec)
		}
	case ChaosGarbage:
		rng := rand64{s: uint64(time.Now().UnixNano()) ^ uint64(n)}
		resp, err := cr.post(ectx, bytes.NewReader(garbageLine(&rng, 64+int(rng.next()%4096))), "")
		if err != nil {
			cr.httpFailed(ctx, rec, err)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		switch {
		case resp.StatusCode >= 400 && resp.StatusCode < 500 && bytes.Contains(body, []byte(strconv.Itoa(codec.CodeParseError))):
			rec.record(fmt.Sprintf("status_%d_parse_error", resp.StatusCode), asExpected, 0, "")
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			rec.record(fmt.Sprintf("status_%d", resp.StatusCode), asExpected, 0, "")
		default:
			rec.judged(fmt.Sprintf("status_%d", resp.StatusCode), unexpected, 0, clip(body))
		}
	case ChaosOversized:
		// An initialized session, so the size is what is refused.
		sid, err := cr.httpInit(ectx, cr.hc)
		if err != nil {
			cr.httpInitFailed(ctx, rec, err)
			return
		}
		size := cr.e.MaxMessage + 64<<10
		body := io.MultiReader(
			strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`),
			io.LimitReader(repeatReader('x'), int64(size)),
			strings.NewReader(`"}}}`))
		sent := time.Now()
		resp, err := cr.post(ectx, body, sid)
		if err != nil {
			if isClose(err) || strings.Contains(err.Error(), "broken pipe") || strings.Contains(err.Error(), "connection reset") {
				rec.record("closed", asExpected, time.Since(sent), "")
				return
			}
			cr.httpFailed(ctx, rec, err)
			return
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode == http.StatusRequestEntityTooLarge {
			rec.record("status_413", asExpected, 0, "")
		} else {
			rec.judged(fmt.Sprintf("status_%d", resp.StatusCode), unexpected, 0, "")
		}
	case ChaosChurn:
		sid, err := cr.httpInit(ectx, cr.hc)
		if err != nil {
			var r *initRefused
			var c *serverCut
			switch {
			case errors.As(err, &r) && r.limited():
				rec.record("initialize_refused_"+strconv.Itoa(r.status), undecided, 0, "")
			case errors.As(err, &c):
				outcome, v, detail := cutOutcome(c)
				rec.record(outcome, v, 0, detail)
			case ctx.Err() == nil && !cr.ended():
				rec.record("initialize_failed", unexpected, 0, err.Error())
			}
			return
		}
		if n%2 == 0 && sid != "" {
			req, _ := http.NewRequestWithContext(ectx, http.MethodDelete, cr.cfg.Target.Addr, nil)
			req.Header.Set(hSession, sid)
			req.Header.Set(hVersion, protocolVersion)
			if resp, err := cr.hc.Do(req); err == nil {
				resp.Body.Close()
			}
			rec.record("initialized+deleted", asExpected, 0, "")
			return
		}
		rec.record("initialized", asExpected, 0, "")
	}
}

func (cr *chaosRun) httpFailed(ctx context.Context, rec *kindRec, err error) {
	var c *serverCut
	switch {
	case errors.As(err, &c):
		outcome, v, detail := cutOutcome(c)
		rec.record(outcome, v, 0, detail)
	case ctx.Err() != nil || cr.ended():
		rec.record("run_ended", undecided, 0, "")
	case isTimeout(err) || errors.Is(err, context.DeadlineExceeded):
		rec.record("hang", unexpected, 0, err.Error())
	default:
		rec.record("failed", unexpected, 0, err.Error())
	}
}

// cutTransport is the hostile HTTP clients' transport. A request the
// server answers 408 Request Timeout was cut by its read timeout (the
// transport's only 408s). On a loaded machine that hits requests sent
// whole (Go's read deadline fails a read that starts after it, bytes
// there or not), and a connection that net/http dialled for a request
// that another one then took sits unused in the pool until the server
// times it out with a 408, which a request sent on it as it comes takes
// for its answer. The server's clock for a request starts at its first
// byte, or, on a connection's first, when it began to serve the
// connection: not before the round trip began, or the connection it took
// began to idle. A 408 at least readTimeout after that is returned as a
// *serverCut error, which the episode's error path judges (cutOutcome:
// undecided); a 408 sooner is returned as it is, for the episode to call
// unexpected. The kinds that await a 408 on purpose (half_sent,
// body_declare) drive connections of their own.
type cutTransport struct {
	rt          http.RoundTripper
	readTimeout time.Duration
}

func (t cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	began := time.Now()
	var idle atomic.Int64
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		if i.WasIdle {
			idle.Store(int64(i.IdleTime))
		}
	}}))
	resp, err := t.rt.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout || time.Since(began)+time.Duration(idle.Load()) < t.readTimeout {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return nil, &serverCut{limit: "read-timeout", at: time.Now()}
}

// repeatReader reads an endless run of one byte.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}
