package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// The task hoarder: one client asking for many long tasks at once, then
// leaving.

// tasksMeta is the _meta of a 2026-07-28 request from a client that speaks
// the tasks extension.
const tasksMeta = `{"` + mcp.MetaProtocolVersion + `":"` + ProtocolStateless + `","` +
	mcp.MetaClientCapabilities + `":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"` +
	mcp.MetaClientInfo + `":{"name":"mcpload","version":"1"}}`

// taskTally counts a hoard's answers.
type taskTally struct {
	created, completed, refused, refusedNoRetry, other int
	first                                              string
}

// taskAnswer files one answer: a task created (2025-11-25: a result with
// "task"; 2026-07-28: "resultType":"task"), a result that is not a task, a
// -32000 refusal (by the limit it names), or anything else.
func (t *taskTally) taskAnswer(rec *kindRec, msg *codec.Message) {
	switch {
	case msg.Kind == codec.KindResponse && (bytes.Contains(msg.Result, []byte(`"resultType":"task"`)) || bytes.Contains(msg.Result, []byte(`"task":{`))):
		t.created++
	case msg.Kind == codec.KindResponse:
		t.completed++
	case msg.Kind == codec.KindError && errorCode(msg) == codec.CodeServerBusy:
		t.refused++
		rec.answer("refused_"+limitName(msg.Error), 1)
	default:
		t.other++
		if t.first == "" {
			t.first = answerName(msg) + " " + clip(msg.Error)
		}
	}
}

// verdict judges a hoard of calls, its reading ended by err (nil: every
// answer came).
func (cr *chaosRun) hoardVerdict(rec *kindRec, t taskTally, calls int, err error, sent time.Time) {
	rec.answer("created", int64(t.created))
	var cut *serverCut
	switch {
	case t.created > cr.e.MaxTasksPerClient:
		rec.judged("over_limit", unexpected, 0, fmt.Sprintf("%d tasks for one client, more than %d", t.created, cr.e.MaxTasksPerClient))
	case t.other > 0:
		rec.judged("bad_answer", unexpected, 0, fmt.Sprintf("%d answers neither a task nor a -32000 refusal, the first %s", t.other, t.first))
	case t.refusedNoRetry > 0:
		rec.judged("refused_without_retry_after", unexpected, 0, fmt.Sprintf("%d of %d refusals", t.refusedNoRetry, t.refused))
	case errors.As(err, &cut):
		outcome, v, detail := cutOutcome(cut)
		rec.record(outcome, v, 0, detail)
	case err != nil && cr.ended():
		rec.record("run_ended", undecided, 0, "")
	case err != nil:
		rec.record("failed", unexpected, 0, err.Error())
	case t.refused == 0 && calls > cr.e.MaxTasksPerClient:
		rec.judged("none_refused", unexpected, 0, fmt.Sprintf("%d tasks asked for at once, none refused (%d created, %d answered at once)", calls, t.created, t.completed))
	default:
		rec.tookTime(time.Since(sent))
		rec.record("refused_past_limit", asExpected, 0, "")
	}
}

// taskCall returns a task-augmented tools/call of TaskTool: 2025-11-25
// (params.task) or 2026-07-28 (the tasks extension in _meta).
func (cr *chaosRun) taskCall(id int, legacy bool) []byte {
	args, _ := compile(cr.e.TaskArgs)
	var v vars
	v.fill(&rand64{s: uint64(id) + 1}, 0, uint64(id))
	argsBuf := render(nil, args, &v)
	ids := strconv.Itoa(id)
	if legacy {
		return codec.AppendRequest(nil, []byte(ids), mcp.MethodToolsCall,
			fmt.Appendf(nil, `{"name":%q,"arguments":%s,"task":{"ttl":60000}}`, cr.e.TaskTool, argsBuf))
	}
	return modernRequest(ids, mcp.MethodToolsCall, fmt.Sprintf(`"name":%q,"arguments":%s`, cr.e.TaskTool, argsBuf), tasksMeta)
}

// taskHoard is a task_hoard episode: 2025-11-25 tasks in odd episodes,
// 2026-07-28 ones in even ones.
func (cr *chaosRun) taskHoard(ctx context.Context, _, n int, rec *kindRec) {
	legacy := n%2 == 1
	if cr.cfg.Target.Transport == "http" {
		cr.httpTaskHoard(ctx, legacy, rec)
		return
	}
	rc, err := cr.dialRaw(ctx)
	if err != nil {
		cr.dialFailed(ctx, rec, err)
		return
	}
	defer rc.c.Close()
	rec = cr.onConn(rec, rc)
	if legacy {
		if err := rc.initialize(cr.deadline(cr.timeout)); err != nil {
			if !cr.ended() {
				rec.record("initialize_failed", unexpected, 0, err.Error())
			}
			return
		}
	}
	calls := cr.e.TaskCalls
	var all []byte
	for id := 1; id <= calls; id++ {
		all = append(all, cr.taskCall(id, legacy)...)
		all = append(all, '\n')
	}
	sent := time.Now()
	done := make(chan struct {
		t   taskTally
		err error
	}, 1)
	go func() {
		var t taskTally
		var msg codec.Message
		var err error
		for n := 0; n < calls; {
			if _, err = rc.readMsg(cr.deadline(cr.timeout), &msg); err != nil {
				break
			}
			if msg.Kind == codec.KindResponse || msg.Kind == codec.KindError {
				n++
				t.taskAnswer(rec, &msg)
			}
		}
		done <- struct {
			t   taskTally
			err error
		}{t, err}
	}()
	werr := rc.write(all, cr.deadline(cr.timeout))
	d := <-done
	if d.err == nil && werr != nil {
		d.err = werr
	}
	cr.hoardVerdict(rec, d.t, calls, d.err, sent)
}

// httpTaskHoard POSTs the calls at once: on a session (2025-11-25) or
// stateless (2026-07-28).
func (cr *chaosRun) httpTaskHoard(ctx context.Context, legacy bool, rec *kindRec) {
	ectx, cancel := context.WithDeadline(ctx, cr.deadline(cr.timeout))
	defer cancel()
	sid := ""
	if legacy {
		var err error
		if sid, err = cr.httpSession(ectx, cr.kc); err != nil {
			cr.httpInitFailed(ctx, rec, err)
			return
		}
		defer cr.httpDeleteWith(cr.kc, sid)
	}
	calls := cr.e.TaskCalls
	var mu sync.Mutex
	var t taskTally
	var failed error
	var wg sync.WaitGroup
	sent := time.Now()
	for id := 1; id <= calls; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := cr.taskCall(id, legacy)
			var resp *http.Response
			var err error
			if legacy {
				resp, err = cr.postWith(ectx, cr.hc, bytes.NewReader(body), sid)
			} else {
				resp, err = cr.postModern(ectx, cr.hc, mcp.MethodToolsCall, cr.e.TaskTool, body, nil)
			}
			var b []byte
			if err == nil {
				b, err = readBody(resp, 1<<20)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				// The first error, but one that is not a cut of the read
				// timeout (cutTransport) before one that is.
				if failed == nil || (cutLimit(failed) != "" && cutLimit(err) == "") {
					failed = err
				}
				return
			}
			var msg codec.Message
			switch {
			case !jsonAnswerOf(resp.Header.Get("Content-Type"), b, strconv.Itoa(id), &msg):
				t.other++
				if t.first == "" {
					t.first = fmt.Sprintf("status %d: %s", resp.StatusCode, clip(b))
				}
			case msg.Kind == codec.KindError && errorCode(&msg) == codec.CodeServerBusy &&
				resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable:
				// A refusal must say so in its status (issue 20: it was 200).
				t.other++
				if t.first == "" {
					t.first = fmt.Sprintf("a -32000 refusal with status %d: %s", resp.StatusCode, clip(b))
				}
			default:
				if msg.Kind == codec.KindError && resp.Header.Get("Retry-After") == "" {
					t.refusedNoRetry++
				}
				t.taskAnswer(rec, &msg)
			}
		}()
	}
	wg.Wait()
	cr.hoardVerdict(rec, t, calls, failed, sent)
}

// readBody reads at most limit bytes of resp's body and closes it.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, limit))
}
