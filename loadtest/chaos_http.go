package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpedge/mcpedge/codec"
)

// HTTP variants. They use net/http without keep-alive: each episode is a
// connection of its own.

func (cr *chaosRun) post(ctx context.Context, body io.Reader, sid string) (*http.Response, error) {
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
	return cr.hc.Do(req)
}

// httpInit posts initialize and returns the session id.
func (cr *chaosRun) httpInit(ctx context.Context) (string, error) {
	resp, err := cr.post(ctx, bytes.NewReader(codec.AppendRequest(nil, []byte("0"), "initialize", []byte(initParams))), "")
	if err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("initialize answered %s", resp.Status)
	}
	return resp.Header.Get(hSession), nil
}

func (cr *chaosRun) httpAbandon(ctx context.Context, rec *kindRec) {
	ictx, cancel := context.WithTimeout(ctx, cr.timeout)
	defer cancel()
	if _, err := cr.httpInit(ictx); err != nil {
		if ctx.Err() == nil {
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
			rec.record(fmt.Sprintf("status_%d", resp.StatusCode), unexpected, 0, clip(body))
		}
	case ChaosOversized:
		// An initialized session, so the size is what is refused.
		sid, err := cr.httpInit(ectx)
		if err != nil {
			cr.httpFailed(ctx, rec, err)
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
			rec.record(fmt.Sprintf("status_%d", resp.StatusCode), unexpected, 0, "")
		}
	case ChaosChurn:
		sid, err := cr.httpInit(ectx)
		if err != nil {
			if ctx.Err() == nil {
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
	switch {
	case ctx.Err() != nil || cr.ended():
		rec.record("run_ended", undecided, 0, "")
	case isTimeout(err) || errors.Is(err, context.DeadlineExceeded):
		rec.record("hang", unexpected, 0, err.Error())
	default:
		rec.record("failed", unexpected, 0, err.Error())
	}
}

// repeatReader reads an endless run of one byte.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}
