package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// Hostile clients of subscriptions: dup_listen and sub_flood.

// modernRequest is a 2026-07-28 request: fields (members of params, may be
// empty) and mcpload's _meta (meta, when not empty, instead).
func modernRequest(id, method, fields, meta string) []byte {
	if meta == "" {
		meta = modernMeta
	}
	b := make([]byte, 0, len(fields)+len(meta)+96)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"method":`...)
	b = codec.AppendString(b, method)
	b = append(b, `,"params":{`...)
	if fields != "" {
		b = append(b, fields...)
		b = append(b, ',')
	}
	b = append(b, `"_meta":`...)
	b = append(b, meta...)
	return append(b, "}}"...)
}

// postModern POSTs a 2026-07-28 request with its revision's headers (no
// session): Mcp-Method, and Mcp-Name when name is not empty.
func (cr *chaosRun) postModern(ctx context.Context, hc *http.Client, method, name string, body []byte, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cr.cfg.Target.Addr, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(hVersion, ProtocolStateless)
	req.Header.Set(hMethod, method)
	if name != "" {
		req.Header.Set(hName, name)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return hc.Do(req)
}

// boardName is a board entry of this run's client, for dup_listen.
func (cr *chaosRun) boardName(what string, client int) string {
	return "chaos-" + cr.tag + "-" + what + "-" + strconv.Itoa(client)
}

// listenFrame is a subscriptions/listen naming dup n times (as many as fit
// in max bytes) and then end once; it returns the frame and n.
func listenFrame(id, dup, end string, n, max int) ([]byte, int) {
	q := strconv.Quote(dup)
	fixed := len(modernRequest(id, mcp.MethodSubscriptionsListen, `"notifications":{"resourceSubscriptions":[]}`, "")) + len(end) + 8
	n = max1(min(n, (max-fixed-1024)/(len(q)+1)))
	var b strings.Builder
	b.Grow(n*(len(q)+1) + len(end) + 64)
	b.WriteString(`"notifications":{"resourceSubscriptions":[`)
	for range n {
		b.WriteString(q)
		b.WriteByte(',')
	}
	b.WriteString(strconv.Quote(end))
	b.WriteString("]}")
	return modernRequest(id, mcp.MethodSubscriptionsListen, b.String(), ""), n
}

func max1(n int) int { return max(n, 1) }

// boardWrite is a 2026-07-28 tools/call of board_write on entry name.
func boardWrite(id, name string) []byte {
	return modernRequest(id, mcp.MethodToolsCall, `"name":"board_write","arguments":{"name":`+strconv.Quote(name)+`,"text":"x"}`, "")
}

// ackURIs returns the URIs a subscriptions acknowledgement lists.
func ackURIs(params []byte) ([]string, error) {
	var p struct {
		Notifications mcp.SubscriptionFilter `json:"notifications"`
	}
	if err := codec.Unmarshal(params, &p); err != nil {
		return nil, err
	}
	return p.Notifications.ResourceSubscriptions, nil
}

// updatedURI returns the URI of a notifications/resources/updated, or "".
func updatedURI(msg *codec.Message) string {
	if msg.Kind != codec.KindNotification || msg.Method != mcp.NotificationResourceUpdated {
		return ""
	}
	var p struct {
		URI string `json:"uri"`
	}
	if codec.Unmarshal(msg.Params, &p) != nil {
		return ""
	}
	return p.URI
}

// dupVerdict judges a dup_listen episode: the acknowledgement's URIs and
// how many times the repeated URI's write was heard before the other's.
func dupVerdict(rec *kindRec, uris []string, dupURI, endURI string, heard int) {
	got := slices.Clone(uris)
	slices.Sort(got)
	want := []string{dupURI, endURI}
	slices.Sort(want)
	switch {
	case !slices.Equal(got, want):
		rec.judged(fmt.Sprintf("acknowledged_%d_uris", len(uris)), unexpected, 0, fmt.Sprintf("the acknowledgement lists %d URIs, want the 2 distinct ones", len(uris)))
	case heard != 1:
		rec.judged(fmt.Sprintf("heard_%d_times", heard), unexpected, 0, fmt.Sprintf("one write of the repeated URI heard %d times", heard))
	default:
		rec.record("deduplicated", asExpected, 0, "")
	}
}

// lineReader reads the next message of a listen, a TCP connection's line
// or an SSE stream's event, by deadline.
type lineReader func(deadline time.Time, msg *codec.Message) error

// readListen reads messages with next until the listen's acknowledgement
// (or its refusal, an error answer with the listen's id "L"), writes the
// repeated URI's board entry and then the other's, and counts how many
// times the first was heard before the second. write sends a board_write
// of name with id; on HTTP it returns once the write is answered, on TCP
// (onStream) its answer comes on the stream and is waited for there.
func (cr *chaosRun) readListen(client int, rec *kindRec, next lineReader, write func(id, name string) error, onStream bool, sent time.Time) {
	dup, end := cr.boardName("dup", client), cr.boardName("end", client)
	dupURI, endURI := "mem://board/"+dup, "mem://board/"+end
	var msg codec.Message
	var uris []string
	for uris == nil {
		if err := next(cr.deadline(cr.e.AnswerWithin), &msg); err != nil {
			cr.readFailed(rec, err, "the listen's acknowledgement")
			return
		}
		switch {
		case msg.Kind == codec.KindNotification && msg.Method == mcp.NotificationSubscriptionsAcked:
			u, err := ackURIs(msg.Params)
			if err != nil {
				rec.judged("bad_acknowledgement", unexpected, 0, err.Error())
				return
			}
			uris = u
			if uris == nil {
				uris = []string{}
			}
			rec.tookTime(time.Since(sent))
		case msg.Kind == codec.KindError:
			rec.answer("listen_"+answerName(&msg), 1)
			rec.judged("listen_refused", unexpected, 0, "error "+strconv.Itoa(errorCode(&msg))+": "+clip(msg.Error))
			return
		}
	}
	heard, endHeard := 0, false
	// readUntil reads the stream until done says so, counting the
	// repeated URI's notifications and noting the other's; false when the
	// episode is over.
	readUntil := func(what string, done func() bool) bool {
		for {
			if err := next(cr.deadline(cr.e.AnswerWithin), &msg); err != nil {
				cr.readFailed(rec, err, what)
				return false
			}
			switch updatedURI(&msg) {
			case dupURI:
				heard++
			case endURI:
				endHeard = true
			}
			if done() {
				return true
			}
		}
	}
	// The writes go one after the other, the second once the first is
	// answered: by then every notification of the first is queued on the
	// stream, before any of the second's.
	for i, name := range []string{dup, end} {
		id := strconv.Itoa(i + 1)
		if err := write(id, name); err != nil {
			if errors.Is(err, errBoardFull) {
				rec.record("board_full", undecided, 0, "")
				return
			}
			cr.readFailed(rec, err, "board_write's answer")
			return
		}
		if !onStream {
			continue
		}
		answered := func() bool {
			return (msg.Kind == codec.KindResponse || msg.Kind == codec.KindError) && string(msg.ID) == id
		}
		if !readUntil("board_write's answer", answered) {
			return
		}
		if msg.Kind == codec.KindError {
			rec.record("write_failed_"+answerName(&msg), undecided, 0, "")
			return
		}
		if bytes.Contains(msg.Result, []byte(`"isError":true`)) {
			rec.record("board_full", undecided, 0, "")
			return
		}
	}
	// On TCP the second write's notification came before its answer.
	if !endHeard && !readUntil("the second write's notification", func() bool { return endHeard }) {
		return
	}
	dupVerdict(rec, uris, dupURI, endURI, heard)
}

// readFailed records a read or write that failed while waiting for what.
func (cr *chaosRun) readFailed(rec *kindRec, err error, what string) {
	var c *serverCut
	switch {
	case errors.As(err, &c):
		outcome, v, detail := cutOutcome(c)
		rec.record(outcome, v, 0, detail)
	case isTimeout(err) && cr.ended():
		rec.record("run_ended", undecided, 0, "")
	case isTimeout(err):
		rec.record("hang", unexpected, 0, "no "+what+" within "+cr.e.AnswerWithin.String())
	case isClose(err):
		rec.record("closed", unexpected, 0, "the connection closed while waiting for "+what)
	default:
		rec.record("failed", unexpected, 0, what+": "+err.Error())
	}
}

// dupListen is a dup_listen episode.
func (cr *chaosRun) dupListen(ctx context.Context, client, _ int, rec *kindRec) {
	dup, end := cr.boardName("dup", client), cr.boardName("end", client)
	frame, n := listenFrame(`"L"`, "mem://board/"+dup, "mem://board/"+end, cr.e.ListenURIs, cr.e.MaxMessage)
	rec.answer("uris_named", int64(n+1))
	if cr.cfg.Target.Transport == "http" {
		cr.httpDupListen(ctx, client, frame, rec)
		return
	}
	rc, err := cr.dialRaw(ctx)
	if err != nil {
		cr.dialFailed(ctx, rec, err)
		return
	}
	defer rc.c.Close()
	rec = cr.onConn(rec, rc)
	sent := time.Now()
	if err := rc.write(append(frame, '\n'), cr.deadline(cr.e.AnswerWithin)); err != nil {
		cr.rawWriteFailed(rc, rec, err)
		return
	}
	next := func(deadline time.Time, msg *codec.Message) error {
		_, err := rc.readMsg(deadline, msg)
		return err
	}
	write := func(id, name string) error {
		err := rc.write(append(boardWrite(id, name), '\n'), cr.deadline(cr.e.AnswerWithin))
		if isClose(err) {
			rc.findNotice(cr.deadline(cr.e.AnswerWithin)) // for cutVerdict
		}
		return err
	}
	cr.readListen(client, rec, next, write, true, sent)
}

// dialFailed records a connection that could not be opened.
func (cr *chaosRun) dialFailed(ctx context.Context, rec *kindRec, err error) {
	if ctx.Err() != nil || cr.ended() {
		return
	}
	rec.record("connect_failed", unexpected, 0, err.Error())
}

// sseReader reads the JSON-RPC messages of an SSE stream one event at a
// time.
type sseReader struct {
	r    *bufio.Reader
	data []byte
}

// next reads the next event with data and decodes it; the deadline is
// the body's (set through the request's context by the caller).
func (s *sseReader) next(msg *codec.Message) error {
	s.data = s.data[:0]
	for {
		line, err := s.r.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if len(s.data) == 0 {
				continue
			}
			return codec.Decode(s.data, msg)
		}
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if len(s.data) > 0 {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
}

// httpDupListen posts the listen, reads its stream, and writes the board
// entries with stateless POSTs.
func (cr *chaosRun) httpDupListen(ctx context.Context, client int, frame []byte, rec *kindRec) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sent := time.Now()
	resp, err := cr.postModern(lctx, cr.hc, mcp.MethodSubscriptionsListen, "", frame, nil)
	if err != nil {
		cr.httpFailed(ctx, rec, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		rec.judged(fmt.Sprintf("status_%d", resp.StatusCode), unexpected, 0, clip(b))
		return
	}
	sr := &sseReader{r: bufio.NewReaderSize(resp.Body, 64<<10)}
	// The stream's reads end when the deadline of the moment passes: a
	// timer cancels the request, and the read error is then a timeout.
	var timedOut atomic.Bool
	next := func(deadline time.Time, msg *codec.Message) error {
		t := time.AfterFunc(time.Until(deadline), func() { timedOut.Store(true); cancel() })
		err := sr.next(msg)
		t.Stop()
		if err != nil && timedOut.Load() {
			return errTimeout
		}
		return err
	}
	write := func(id, name string) error {
		wctx, wcancel := context.WithDeadline(ctx, cr.deadline(cr.e.AnswerWithin))
		defer wcancel()
		resp, err := cr.postModern(wctx, cr.kc, mcp.MethodToolsCall, "board_write", boardWrite(id, name), nil)
		if err != nil {
			return err
		}
		b, err := readBody(resp, 1<<20)
		switch {
		case err != nil:
			return err
		case resp.StatusCode != http.StatusOK:
			return fmt.Errorf("board_write answered %s", resp.Status)
		case bytes.Contains(b, []byte(`"isError":true`)):
			return errBoardFull
		}
		return nil
	}
	cr.readListen(client, rec, next, write, false, sent)
}

// errBoardFull is a board_write refused by the board's limits (other
// clients filled it): the episode is undecided.
var errBoardFull = errors.New("the board is full")

// errTimeout is a read that passed its deadline.
var errTimeout error = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string   { return "timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// subFlood is a sub_flood episode.
func (cr *chaosRun) subFlood(ctx context.Context, client, n int, rec *kindRec) {
	if cr.cfg.Target.Transport == "http" {
		cr.httpSubFlood(ctx, client, n, rec)
		return
	}
	rc, err := cr.dialRaw(ctx)
	if err != nil {
		cr.dialFailed(ctx, rec, err)
		return
	}
	defer rc.c.Close()
	rec = cr.onConn(rec, rc)
	if err := rc.initialize(cr.deadline(cr.timeout)); err != nil {
		if !cr.ended() {
			rec.record("initialize_failed", unexpected, 0, err.Error())
		}
		return
	}
	calls := cr.e.SubFloodCalls
	var all []byte
	for i := 1; i <= calls; i++ {
		all = codec.AppendRequest(all, strconv.AppendInt(nil, int64(i), 10), mcp.MethodResourcesSubscribe,
			fmt.Appendf(nil, `{"uri":"mem://chaos/%s/%d/%d"}`, cr.tag, client, i))
		all = append(all, '\n')
	}
	sent := time.Now()
	type tally struct {
		ok, refused, other int
		first              string
		err                error
	}
	done := make(chan tally, 1)
	go func() {
		var t tally
		var msg codec.Message
		for t.ok+t.refused+t.other < calls {
			if _, err := rc.readMsg(cr.deadline(cr.timeout), &msg); err != nil {
				t.err = err
				break
			}
			switch {
			case msg.Kind == codec.KindResponse:
				t.ok++
			case msg.Kind == codec.KindError && errorCode(&msg) == codec.CodeServerBusy:
				t.refused++
				rec.answer("refused_"+limitName(msg.Error), 1)
			case msg.Kind == codec.KindError:
				t.other++
				if t.first == "" {
					t.first = clip(msg.Error)
				}
			}
		}
		done <- t
	}()
	werr := rc.write(all, cr.deadline(cr.timeout))
	t := <-done
	rec.answer("subscribed", int64(t.ok))
	switch {
	case t.ok > cr.e.MaxSubscriptions:
		rec.judged("over_limit", unexpected, 0, fmt.Sprintf("%d subscriptions in one session, more than %d", t.ok, cr.e.MaxSubscriptions))
	case t.other > 0:
		rec.judged("bad_answer", unexpected, 0, fmt.Sprintf("%d answers neither a subscription nor a -32000 refusal, the first %s", t.other, t.first))
	case t.err != nil && isTimeout(t.err) && cr.ended():
		rec.record("run_ended", undecided, 0, "")
	case t.err != nil || werr != nil:
		rec.record("failed", unexpected, 0, fmt.Sprint(t.err, werr))
	case t.refused == 0:
		rec.judged("none_refused", unexpected, 0, fmt.Sprintf("%d subscriptions, none refused", t.ok))
	default:
		rec.tookTime(time.Since(sent))
		rec.record("refused_past_limit", asExpected, 0, "")
	}
}

// limitName returns the limit a -32000 error's data names, or "busy".
func limitName(errObj []byte) string {
	var e struct {
		Data struct {
			Limit string `json:"limit"`
		} `json:"data"`
	}
	if codec.Unmarshal(errObj, &e) == nil && e.Data.Limit != "" {
		return e.Data.Limit
	}
	return "busy"
}

// httpSubFlood subscribes on one session, POST after POST on a keep-alive
// connection, then asks for a stateless listen of one URI more than the
// limit.
func (cr *chaosRun) httpSubFlood(ctx context.Context, client, n int, rec *kindRec) {
	ectx, cancel := context.WithDeadline(ctx, cr.deadline(cr.timeout))
	defer cancel()
	sid, err := cr.httpSession(ectx, cr.kc)
	if err != nil {
		cr.httpInitFailed(ctx, rec, err)
		return
	}
	defer cr.httpDelete(sid)
	calls := cr.e.SubFloodCalls
	var ok, refused, noRetry, other, failed int
	var first string
	var cut *serverCut // the call the read timeout cut (cutTransport)
	note := func(s string) {
		if first == "" {
			first = s
		}
	}
	sent := time.Now()
	for i := 1; i <= calls && ectx.Err() == nil; i++ {
		body := codec.AppendRequest(nil, strconv.AppendInt(nil, int64(i), 10), mcp.MethodResourcesSubscribe,
			fmt.Appendf(nil, `{"uri":"mem://chaos/%s/%d/%d/%d"}`, cr.tag, client, n, i))
		a, err := cr.httpCallWith(ectx, cr.kc, sid, body, strconv.Itoa(i))
		switch {
		case errors.As(err, &cut):
		case err != nil:
			failed++
			note(err.Error())
		case a.status == http.StatusOK && a.answer == "result":
			ok++
		case a.status == http.StatusTooManyRequests && a.answer == "error_-32000":
			refused++
			if a.retryAfter == "" {
				noRetry++
			}
		default:
			other++
			note(fmt.Sprintf("status %d: %s", a.status, clip(a.body)))
		}
		if err != nil {
			break
		}
	}
	rec.answer("subscribed", int64(ok))
	rec.answer("status_429", int64(refused))
	listen, listenCut := "", (*serverCut)(nil)
	if failed == 0 && other == 0 && cut == nil {
		listen, listenCut = cr.httpListenOverLimit(ectx, client, n)
	}
	// What the server answered wrong comes first, then what interrupted
	// the episode.
	switch {
	case ok > cr.e.MaxSubscriptions:
		rec.judged("over_limit", unexpected, 0, fmt.Sprintf("%d subscriptions in one session, more than %d", ok, cr.e.MaxSubscriptions))
	case other > 0:
		rec.judged("bad_answer", unexpected, 0, fmt.Sprintf("%d answers neither 200 nor 429 -32000, the first %s", other, first))
	case noRetry > 0:
		rec.judged("refused_without_retry_after", unexpected, 0, fmt.Sprintf("%d of %d refusals", noRetry, refused))
	case cut != nil:
		outcome, v, detail := cutOutcome(cut)
		rec.record(outcome, v, 0, detail)
	case (failed > 0 || ok+refused < calls) && (ctx.Err() != nil || cr.ended()):
		rec.record("run_ended", undecided, 0, "")
	case failed > 0:
		rec.record("failed", unexpected, 0, fmt.Sprintf("%d calls failed, the first: %s", failed, first))
	case refused == 0:
		rec.judged("none_refused", unexpected, 0, fmt.Sprintf("%d subscriptions, none refused", ok))
	case listenCut != nil:
		outcome, v, detail := cutOutcome(listenCut)
		rec.record(outcome, v, 0, detail)
	case listen == "run_ended":
		rec.record("run_ended", undecided, 0, "")
	case listen != "":
		rec.judged("listen_over_limit_"+strings.Fields(listen)[0], unexpected, 0, "a stateless listen of one URI more than the limit: "+listen)
	default:
		rec.tookTime(time.Since(sent))
		rec.record("refused_past_limit", asExpected, 0, "")
	}
}

// httpListenOverLimit posts a stateless listen of MaxSubscriptions+1
// distinct URIs: "" when it is refused 429 with Retry-After and -32000,
// else what came instead, or the read timeout's cut of it.
func (cr *chaosRun) httpListenOverLimit(ctx context.Context, client, n int) (string, *serverCut) {
	var b strings.Builder
	b.WriteString(`"notifications":{"resourceSubscriptions":[`)
	for i := range cr.e.MaxSubscriptions + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"mem://chaos/%s/l/%d/%d/%d"`, cr.tag, client, n, i)
	}
	b.WriteString("]}")
	resp, err := cr.postModern(ctx, cr.kc, mcp.MethodSubscriptionsListen, "", modernRequest(`"L"`, mcp.MethodSubscriptionsListen, b.String(), ""), nil)
	var cut *serverCut
	switch {
	case errors.As(err, &cut):
		return "", cut
	case err != nil && (ctx.Err() != nil || cr.ended()):
		return "run_ended", nil
	case err != nil:
		return "failed " + err.Error(), nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	ans := findAnswer(resp.Header.Get("Content-Type"), body, `"L"`)
	if resp.StatusCode == http.StatusTooManyRequests && ans == "error_-32000" && resp.Header.Get("Retry-After") != "" {
		return "", nil
	}
	return fmt.Sprintf("status_%d %s", resp.StatusCode, clip(body)), nil
}
