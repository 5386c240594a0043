package gateway

import "github.com/valyala/fasthttp"

// Cancelling a 2026-07-28 request over Streamable HTTP: there is no
// session to send notifications/cancelled in, so the request's response
// stream is closed (the revision's cancellation on HTTP). What the
// gateway cancels this way: a call whose downstream request ended, and
// the listen stream it reopens when the subscribed URIs change.

// trackID notes resp as the event stream answering request id.
func (p *httpPipe) trackID(id []byte, resp *fasthttp.Response) {
	p.smu.Lock()
	if p.byID == nil {
		p.byID = map[string]*fasthttp.Response{}
	}
	p.byID[string(id)] = resp
	p.smu.Unlock()
}

func (p *httpPipe) untrackID(id []byte) {
	p.smu.Lock()
	delete(p.byID, string(id))
	p.smu.Unlock()
}

// cancelStream closes the event stream answering request id, if one is
// being read: its read ends, and the upstream sees the request
// cancelled.
func (p *httpPipe) cancelStream(id []byte) {
	p.smu.Lock()
	resp := p.byID[string(id)]
	delete(p.byID, string(id))
	p.smu.Unlock()
	if resp != nil {
		_ = resp.CloseBodyStream()
	}
}

// streamCanceler is a connection that cancels a request by closing its
// response stream.
type streamCanceler interface {
	cancelStream(id []byte)
}
