package loadtest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
)

// hog runs one hog episode: HogSessions sessions at once, each
// pipelining HogCalls slow calls (ChaosHog). Each session records its own
// outcome, and how long its calls took all to be answered (Took): the
// hogs' share of the pool.
func (cr *chaosRun) hog(ctx context.Context, _, _ int, rec *kindRec) {
	var wg sync.WaitGroup
	for range cr.e.HogSessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cr.cfg.Target.Transport == "http" {
				cr.httpHogSession(ctx, rec)
			} else {
				cr.tcpHogSession(ctx, rec)
			}
		}()
	}
	wg.Wait()
}

func (cr *chaosRun) tcpHogSession(ctx context.Context, rec *kindRec) {
	rc, err := cr.dialRaw(ctx)
	if err != nil {
		if ctx.Err() == nil && !cr.ended() {
			rec.record("connect_failed", unexpected, 0, err.Error())
		}
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
	sent := time.Now()
	t, werr := cr.pipeline(rc, cr.e.HogCalls)
	for k, n := range t.answers {
		rec.answer(k, n)
	}
	refused := t.answers["error_"+strconv.Itoa(codec.CodeServerBusy)]
	switch {
	case refused > 0:
		rec.judged("refused", unexpected, 0, fmt.Sprintf("%d of %d pipelined calls refused, within the session's bounds: %s", refused, cr.e.HogCalls, fmtCounts(t.answers)))
	case t.err == nil && werr == nil && t.answers["result"] == int64(cr.e.HogCalls):
		rec.tookTime(time.Since(sent))
		rec.record("all_served", asExpected, 0, "")
	case t.err == nil && werr == nil:
		rec.judged("bad_answer", unexpected, 0, fmtCounts(t.answers))
	case isTimeout(t.err) && cr.ended():
		rec.record("run_ended", undecided, 0, "")
	case isClose(t.err) || (werr != nil && isClose(werr)):
		// The notice of a limit the server closed it over, if any, was
		// read: onConn judges it.
		rec.record("closed", unexpected, 0, fmt.Sprintf("after %d of %d answers", t.n, cr.e.HogCalls))
	default:
		rec.record("failed", unexpected, 0, fmt.Sprint(t.err, werr))
	}
}

func (cr *chaosRun) httpHogSession(ctx context.Context, rec *kindRec) {
	ectx, cancel := context.WithDeadline(ctx, cr.deadline(cr.timeout))
	defer cancel()
	sid, err := cr.httpSession(ectx, cr.hc)
	if err != nil {
		cr.httpInitFailed(ctx, rec, err)
		return
	}
	defer cr.httpDelete(sid)
	sent := time.Now()
	t := cr.httpConcurrent(ectx, sid, cr.e.HogCalls, rec)
	switch {
	case t.refused > 0:
		rec.judged("refused", unexpected, 0, fmt.Sprintf("%d of %d concurrent calls refused 429 or 503, within the session's bounds", t.refused, t.calls))
	case t.other > 0:
		rec.judged("bad_answer", unexpected, 0, fmt.Sprintf("%d of %d calls, the first %s", t.other, t.calls, t.firstOther))
	case t.failed > 0 && (ctx.Err() != nil || cr.ended()):
		rec.record("run_ended", undecided, 0, "")
	case t.failed > 0:
		rec.judged("failed", unexpected, 0, fmt.Sprintf("%d of %d calls: %v", t.failed, t.calls, t.firstErr))
	case t.cuts > 0:
		outcome, v, detail := cutOutcome(t.firstCut)
		rec.record(outcome, v, 0, detail)
	case t.results < t.calls:
		rec.judged("error_answers", unexpected, 0, fmt.Sprintf("%d of %d calls answered 200 with a JSON-RPC error", t.calls-t.results, t.calls))
	default:
		rec.tookTime(time.Since(sent))
		rec.record("all_served", asExpected, 0, "")
	}
}
