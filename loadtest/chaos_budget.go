package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
)

// Hostile clients of the server's budgets: session_flood (sessions per
// address), body_declare (request bodies, -max-buffered) and no_read_many
// (queued answers, -max-outbound-total).

// sessionFlood is a session_flood episode: initialize and ping, over and
// over (a few at once), until refused; then every session opened is
// deleted.
func (cr *chaosRun) sessionFlood(ctx context.Context, _, _ int, rec *kindRec) {
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var sids []string
	var refusal, bad string // the first refusal; the first unexpected answer
	var failed error
	var reaped int64
	defer func() { cr.deleteAll(sids) }()
	sent := time.Now()
	ping := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	// one opens a session and pings it; false once the flood is over.
	one := func() bool {
		rctx, rcancel := context.WithDeadline(ectx, cr.deadline(cr.timeout))
		defer rcancel()
		began := time.Now()
		sid, err := cr.httpInit(rctx, cr.kc)
		if err == nil && sid == "" {
			err = errors.New("initialize answered without " + hSession)
		}
		var a httpAnswer
		if err == nil {
			mu.Lock()
			sids = append(sids, sid)
			mu.Unlock()
			a, err = cr.httpCallWith(rctx, cr.kc, sid, ping, "1")
		}
		var gone string // goneVerdict's outcome and detail, for a ping answered 404 unexpectedly
		if err == nil && a.status == http.StatusNotFound {
			if o, v, d := cr.goneVerdict(&sessionGone{what: "the ping", after: time.Since(began)}); v != undecided {
				gone = o + ": " + d
			}
		}
		mu.Lock()
		defer mu.Unlock()
		var r *initRefused
		switch {
		case refusal != "" || bad != "" || failed != nil:
		case err == nil && a.status == http.StatusNotFound && gone == "":
			// Reaped before the ping came (a slow client machine): it
			// holds no share of the address now; the flood goes on.
			reaped++
			if len(sids) < cr.e.SessionFloodMax {
				return true
			}
		case gone != "":
			bad = gone
		case err == nil && (a.status != http.StatusOK || a.answer != "result"):
			bad = fmt.Sprintf("ping_status_%d: the ping of a new session: %s", a.status, clip(a.body))
		case err == nil:
			if len(sids) < cr.e.SessionFloodMax {
				return true
			}
		case errors.As(err, &r) && r.limited():
			refusal = "refused_" + strconv.Itoa(r.status)
			rec.tookTime(time.Since(sent))
		case errors.As(err, &r):
			bad = fmt.Sprintf("status_%d: %v (a refusal needs 429 or 503 and Retry-After)", r.status, err)
		default:
			failed = err
		}
		cancel()
		return false
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for one() {
			}
		}()
	}
	wg.Wait()
	rec.answer("sessions_opened", int64(len(sids)))
	if reaped > 0 {
		rec.answer("sessions_reaped_before_use", reaped)
	}
	switch {
	case refusal != "":
		rec.record(refusal, asExpected, 0, "")
	case bad != "":
		outcome, detail, _ := strings.Cut(bad, ": ")
		rec.judged(outcome, unexpected, 0, detail)
	case failed != nil:
		cr.httpFailed(ctx, rec, failed)
	default:
		rec.judged("no_limit", unexpected, 0, fmt.Sprintf("%d sessions from one address, none refused", len(sids)))
	}
}

// deleteAll deletes sessions, a few at a time, even once the run ended.
func (cr *chaosRun) deleteAll(sids []string) {
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(8, len(sids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sid := range work {
				cr.httpDeleteWith(cr.kc, sid)
			}
		}()
	}
	for _, sid := range sids {
		work <- sid
	}
	close(work)
	wg.Wait()
}

// bodyDeclare is a body_declare episode: DeclareConns connections at
// once, each declaring a big body and sending a few bytes of it.
func (cr *chaosRun) bodyDeclare(ctx context.Context, _, _ int, rec *kindRec) {
	var wg sync.WaitGroup
	for range cr.e.DeclareConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cr.declareOne(ctx, rec)
		}()
	}
	wg.Wait()
}

func (cr *chaosRun) declareOne(ctx context.Context, rec *kindRec) {
	c, err := cr.dialHTTP(ctx)
	if err != nil {
		cr.dialFailed(ctx, rec, err)
		return
	}
	defer c.Close()
	msg := cr.appendPostHead(nil, "", cr.e.DeclareBytes)
	msg = append(msg, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{`...)
	_ = c.SetWriteDeadline(cr.deadline(cr.e.AnswerWithin))
	if _, err := c.Write(msg); err != nil {
		if isClose(err) {
			rec.record("closed", asExpected, 0, "")
			return
		}
		cr.writeFailed(rec, err)
		return
	}
	// Any refusal will do (408 at the read timeout, 413, 429 or 503 for a
	// budget, 401 without a token); an answer to a request whose body
	// never came will not.
	cr.awaitClose(c, time.Now(), rec, "a few bytes of the declared body", func(code int) bool { return code >= 400 })
}

// noReadMany is a no_read_many episode: NoReadConns no_read episodes at
// once.
func (cr *chaosRun) noReadMany(ctx context.Context, client, n int, rec *kindRec) {
	var wg sync.WaitGroup
	for range cr.e.NoReadConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cr.cfg.Target.Transport == "http" {
				cr.httpEpisode(ctx, ChaosNoRead, n, rec)
			} else {
				cr.tcpEpisode(ctx, ChaosNoRead, client, n, rec)
			}
		}()
	}
	wg.Wait()
}

// jsonAnswerOf returns the JSON-RPC message of an answer's body: the body
// itself, or the SSE event holding the answer to id.
func jsonAnswerOf(contentType string, body []byte, id string, msg *codec.Message) bool {
	if !bytes.HasPrefix([]byte(contentType), []byte("text/event-stream")) {
		return codec.Decode(bytes.TrimSpace(body), msg) == nil
	}
	var p codec.SSEParser
	p.MaxSize = 4 << 20
	for len(body) > 0 {
		ev, n, ok, err := p.Next(body)
		if err != nil || n == 0 {
			return false
		}
		body = body[n:]
		if ok && len(ev.Data) > 0 && codec.Decode(ev.Data, msg) == nil && string(msg.ID) == id {
			return true
		}
	}
	return false
}
