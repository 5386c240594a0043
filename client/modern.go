package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// Revision 2026-07-28 ("modern") has no session: every request carries
// the protocol version, the client's capabilities and its info in
// params._meta, server/discover replaces initialize, and a request may be
// answered with an InputRequiredResult (multi round-trip requests), which
// the client fulfils with its handlers and retries.

// Era is the generation of the protocol a client speaks.
type Era uint8

// Eras.
const (
	// EraAuto sends server/discover first and falls back to initialize
	// when the server does not speak 2026-07-28.
	EraAuto Era = iota
	// EraModern speaks 2026-07-28 only (no fallback).
	EraModern
	// EraLegacy speaks the session revisions only (initialize first).
	EraLegacy
)

// String returns the era's lower-case name.
func (e Era) String() string {
	switch e {
	case EraAuto:
		return "auto"
	case EraModern:
		return "modern"
	case EraLegacy:
		return "legacy"
	}
	return "era(" + strconv.Itoa(int(e)) + ")"
}

// Errors of the 2026-07-28 support.
var (
	// ErrRemovedInModern reports a call of a method 2026-07-28 removed
	// (resources/subscribe and unsubscribe: use Listen).
	ErrRemovedInModern = errors.New("client: method removed in " + mcp.Version20260728)
	// ErrModernOnly reports a call that needs 2026-07-28 (Listen) on a
	// client that negotiated a session revision.
	ErrModernOnly = errors.New("client: needs protocol " + mcp.Version20260728)
	// ErrInputRounds reports a request still asking for input after
	// Options.MaxInputRounds rounds.
	ErrInputRounds = errors.New("client: too many input rounds")
)

// defaultInputRounds bounds the input rounds of one request.
const defaultInputRounds = 8

// modernState is what modern requests carry: the revision and the
// members of params._meta (without braces) the client adds to each.
type modernState struct {
	version string
	meta    []byte
}

// modernConn is implemented by connections that bind 2026-07-28 their
// own way (Streamable HTTP: the standard and custom headers, no session).
type modernConn interface {
	// setModern switches the connection to version ("" back to the
	// session revisions); params returns the x-mcp-header parameters of
	// a tool, nil when it has none.
	setModern(version string, params func(tool string) []mcp.HeaderParam)
}

func (c *Client) newModernState(version string) (*modernState, error) {
	caps, err := codec.Marshal(&c.caps)
	if err != nil {
		return nil, err
	}
	info, err := codec.Marshal(&c.opts.ClientInfo)
	if err != nil {
		return nil, err
	}
	var b []byte
	b = codec.AppendString(b, mcp.MetaProtocolVersion)
	b = append(b, ':')
	b = codec.AppendString(b, version)
	b = append(b, ',')
	b = codec.AppendString(b, mcp.MetaClientCapabilities)
	b = append(b, ':')
	b = append(b, caps...)
	b = append(b, ',')
	b = codec.AppendString(b, mcp.MetaClientInfo)
	b = append(b, ':')
	b = append(b, info...)
	return &modernState{version: version, meta: b}, nil
}

// Modern reports whether the client speaks 2026-07-28 with its server.
func (c *Client) Modern() bool { return Era(c.era.Load()) == EraModern && c.modern.Load() != nil }

// modernParams returns params with the client's _meta members (and the
// log level, and progressToken id when token) merged into params._meta.
func (c *Client) modernParams(ms *modernState, params []byte, id int64, token bool) ([]byte, error) {
	meta := make([]byte, 0, len(ms.meta)+64)
	meta = append(meta, '{')
	meta = append(meta, ms.meta...)
	if lv := c.logLevel.Load(); lv != nil && *lv != "" {
		meta = append(meta, ',')
		meta = codec.AppendString(meta, mcp.MetaLogLevel)
		meta = append(meta, ':')
		meta = codec.AppendString(meta, *lv)
	}
	if token {
		meta = append(meta, `,"progressToken":`...)
		meta = strconv.AppendInt(meta, id, 10)
	}
	meta = append(meta, '}')
	p := bytes.TrimSpace(params)
	if len(p) == 0 || string(p) == "null" {
		out := make([]byte, 0, len(meta)+12)
		out = append(out, `{"_meta":`...)
		out = append(out, meta...)
		return append(out, '}'), nil
	}
	if p[0] != '{' {
		return nil, fmt.Errorf("client: params must be a JSON object in %s", mcp.Version20260728)
	}
	if !bytes.Contains(p, []byte(`"_meta"`)) {
		out := make([]byte, 0, len(meta)+len(p)+12)
		out = append(out, `{"_meta":`...)
		out = append(out, meta...)
		if inner := bytes.TrimSpace(p[1:]); len(inner) > 0 && inner[0] != '}' {
			out = append(out, ',')
			out = append(out, inner...)
			return out, nil
		}
		return append(out, '}'), nil
	}
	// The caller set _meta (WithMeta): merge, the caller's keys first.
	var obj map[string]json.RawMessage
	if err := codec.Unmarshal(p, &obj); err != nil {
		return nil, fmt.Errorf("client: encoding params: %w", err)
	}
	var own, theirs map[string]json.RawMessage
	if err := codec.Unmarshal(meta, &own); err != nil {
		return nil, err
	}
	if m := obj["_meta"]; len(m) > 0 && string(m) != "null" {
		if err := codec.Unmarshal(m, &theirs); err != nil {
			return nil, fmt.Errorf("client: params._meta must be an object: %w", err)
		}
	}
	if theirs == nil {
		theirs = map[string]json.RawMessage{}
	}
	for k, v := range own {
		theirs[k] = v
	}
	mb, err := codec.Marshal(theirs)
	if err != nil {
		return nil, err
	}
	obj["_meta"] = mb
	return codec.Marshal(obj)
}

// handshake makes l usable: initialize for a session revision, nothing
// (after the first connection) or server/discover for 2026-07-28.
func (c *Client) handshake(ctx context.Context, l *link) error {
	switch Era(c.era.Load()) {
	case EraModern:
		// Reconnection: the era is known, there is nothing to set up.
		ms := c.modern.Load()
		if mc, ok := l.conn.(modernConn); ok {
			mc.setModern(ms.version, c.toolParams)
		}
		return nil
	case EraLegacy:
		return c.initialize(ctx, l, c.legacyVersion)
	}
	switch c.opts.Era {
	case EraLegacy:
		c.era.Store(int32(EraLegacy))
		return c.initialize(ctx, l, c.legacyVersion)
	}
	legacy, err := c.discoverFirst(ctx, l, c.opts.Era == EraModern)
	if err != nil {
		return err
	}
	if legacy != "" {
		c.legacyVersion = legacy
		c.era.Store(int32(EraLegacy))
		return c.initialize(ctx, l, legacy)
	}
	c.era.Store(int32(EraModern))
	return nil
}

// discoverFirst sends server/discover. It returns the session revision
// to initialize with when the server does not speak 2026-07-28 (and
// force is not set).
func (c *Client) discoverFirst(ctx context.Context, l *link, force bool) (legacy string, err error) {
	version := mcp.Version20260728
	if mcp.StatelessVersion(c.opts.ProtocolVersion) {
		version = c.opts.ProtocolVersion
	}
	mc, _ := l.conn.(modernConn)
	timeout := c.opts.InitTimeout
	if !force && !l.blocking {
		// A server of an older revision that ignores server/discover
		// must not cost the whole handshake timeout.
		timeout = min(timeout, 10*time.Second)
	}
	for attempt := 0; ; attempt++ {
		ms, err := c.newModernState(version)
		if err != nil {
			return "", fmt.Errorf("client: server/discover: %w", err)
		}
		c.modern.Store(ms)
		if mc != nil {
			mc.setModern(version, c.toolParams)
		}
		dctx, cancel := context.WithTimeoutCause(ctx, timeout, ErrInitTimeout)
		raw, err := l.call(dctx, mcp.MethodServerDiscover, nil, nil, 0)
		cancel()
		if err == nil {
			var res mcp.DiscoverResult
			if err := codec.Unmarshal(raw, &res); err != nil {
				return "", fmt.Errorf("%w: server/discover result: %w", ErrProtocol, err)
			}
			c.discovered.Store(&res)
			c.discoveredInfo.Store(metaServerInfo(res.Meta))
			c.tools.Store(nil)
			return "", nil
		}
		c.modern.Store(nil)
		if mc != nil {
			mc.setModern("", nil)
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("client: server/discover: %w", context.Cause(ctx))
		}
		supported, isVersion := versionError(err)
		if isVersion {
			// A server that names a 2026 revision the client speaks is
			// asked again with it, once (even the same one: the refusal
			// may have been of a header, or of a proxy's making).
			if v := pickVersion(supported, true); v != "" && attempt == 0 {
				version = v
				continue
			}
			if v := pickVersion(supported, false); v != "" && !force {
				c.log.Debug("server speaks no 2026-07-28 revision; initializing", "version", v)
				return v, nil
			}
			return "", fmt.Errorf("%w: the server supports %v", ErrUnsupportedVersion, supported)
		}
		if force || !legacyAnswer(err) {
			return "", fmt.Errorf("client: server/discover: %w", err)
		}
		c.log.Debug("server/discover refused; initializing", "err", err)
		return c.legacyVersion, nil
	}
}

// versionError reports an UnsupportedProtocolVersionError (-32022, or
// -32602 with data.supported) and the versions it names.
func versionError(err error) ([]string, bool) {
	var e *codec.Error
	if !errors.As(err, &e) {
		return nil, false
	}
	if e.Code != mcp.CodeUnsupportedProtocolVersion && e.Code != codec.CodeInvalidParams {
		return nil, false
	}
	var d struct {
		Supported []string `json:"supported"`
	}
	if len(e.Data) > 0 {
		_ = codec.Unmarshal(e.Data, &d)
	}
	if e.Code == codec.CodeInvalidParams && d.Supported == nil {
		return nil, false
	}
	return d.Supported, true
}

// pickVersion returns the newest of supported the client speaks, of the
// modern era or of the session one.
func pickVersion(supported []string, modern bool) string {
	var list []string
	if modern {
		list = mcp.StatelessVersions[:]
	} else {
		list = mcp.SessionVersions[:]
	}
	for _, v := range list {
		if slices.Contains(supported, v) {
			return v
		}
	}
	return ""
}

// legacyAnswer reports an answer to server/discover that means the server
// speaks a session revision only: any JSON-RPC error, an HTTP 400, 404 or
// 405 without one, or silence until the timeout.
func legacyAnswer(err error) bool {
	var e *codec.Error
	if errors.As(err, &e) {
		return true
	}
	var he *HTTPError
	if errors.As(err, &he) {
		switch he.StatusCode {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
			return true
		}
		return false
	}
	return errors.Is(err, ErrInitTimeout) || errors.Is(err, ErrTimeout)
}

// headerMismatch reports a HeaderMismatch (-32020) answer.
func headerMismatch(err error) bool {
	var e *codec.Error
	return errors.As(err, &e) && e.Code == mcp.CodeHeaderMismatch
}

// resultType returns a result's resultType ("" when absent).
func resultType(raw []byte) string {
	v, ok, err := codec.ObjectField(raw, "resultType")
	if err != nil || !ok {
		return ""
	}
	var s string
	if codec.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// inputRequired is an InputRequiredResult.
type inputRequired struct {
	InputRequests map[string]mcp.InputRequest `json:"inputRequests"`
	RequestState  *string                     `json:"requestState"`
}

// rounds runs the input rounds of a modern request answered with
// input_required: it fulfils the input requests with the client's
// handlers and retries with a new id until the result is complete.
func (c *Client) rounds(ctx context.Context, method string, params, res []byte, progress ProgressFunc) ([]byte, error) {
	maxRounds := c.opts.MaxInputRounds
	if maxRounds <= 0 {
		maxRounds = defaultInputRounds
	}
	for round := 1; ; round++ {
		if resultType(res) != mcp.ResultInputRequired {
			return res, nil
		}
		if round > maxRounds {
			return nil, fmt.Errorf("%w (%d)", ErrInputRounds, maxRounds)
		}
		var ir inputRequired
		if err := codec.Unmarshal(res, &ir); err != nil {
			return nil, fmt.Errorf("%w: input_required result: %w", ErrProtocol, err)
		}
		responses := make(map[string]json.RawMessage, len(ir.InputRequests))
		for key, in := range ir.InputRequests {
			out, err := c.fulfil(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("client: input request %q (%s): %w", key, in.Method, err)
			}
			responses[key] = out
		}
		var err error
		if params, err = withInput(params, responses, ir.RequestState); err != nil {
			return nil, err
		}
		l, err := c.readyLink()
		if err != nil {
			return nil, err
		}
		if res, err = l.call(ctx, method, params, progress, c.opts.RequestTimeout); err != nil {
			return nil, err
		}
	}
}

// fulfil answers one input request with the client's handlers.
func (c *Client) fulfil(ctx context.Context, in mcp.InputRequest) ([]byte, error) {
	r := &ServerRequest{Method: in.Method, Params: in.Params}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	defer r.cancel(nil)
	r.replied.Store(true) // the answer is the handler's return value
	res, err := c.answer(r)
	if errors.Is(err, ErrReplyLater) {
		return nil, errors.New("client: an input request cannot be answered later")
	}
	if err != nil {
		return nil, err
	}
	return marshalParams(res)
}

// withInput returns params with inputResponses and requestState set.
func withInput(params []byte, responses map[string]json.RawMessage, state *string) ([]byte, error) {
	obj := map[string]json.RawMessage{}
	if p := bytes.TrimSpace(params); len(p) > 0 && string(p) != "null" {
		if err := codec.Unmarshal(p, &obj); err != nil {
			return nil, fmt.Errorf("client: params: %w", err)
		}
	}
	ir, err := codec.Marshal(responses)
	if err != nil {
		return nil, err
	}
	obj["inputResponses"] = ir
	delete(obj, "requestState")
	if state != nil {
		s, err := codec.Marshal(*state)
		if err != nil {
			return nil, err
		}
		obj["requestState"] = s
	}
	return codec.Marshal(obj)
}
