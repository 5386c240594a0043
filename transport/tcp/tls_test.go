package tcp_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/internal/testcert"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/mcpedge/mcpedge/transport/proxied"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/mcpedge/mcpedge/transport/tlsconf"
	"github.com/pires/go-proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tlsServer serves TLS with a certificate of ca (and client
// certificates of clientCA required, when not nil).
func tlsServer(t *testing.T, ca, clientCA *testcert.CA, to tcp.Options, eo ...engine.Options) (*server, *tlsconf.Config) {
	t.Helper()
	p := ca.Server(t, "server")
	files := tlsconf.Files{Cert: p.CertFile, Key: p.KeyFile}
	if clientCA != nil {
		files.ClientCA = clientCA.File
	}
	cfg, err := files.Load()
	require.NoError(t, err)
	to.TLS = tlsconf.New(cfg)
	eo = append(eo, engine.Options{})
	return start(t, eo[0], to), to.TLS
}

// dialTLS connects over TLS, trusting roots, with the client
// certificate cert when not nil; the handshake's error is returned.
func dialTLS(t testing.TB, addr string, roots *x509.CertPool, cert *tls.Certificate) (*conn, error) {
	t.Helper()
	cfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	d := &net.Dialer{Timeout: wait}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(wait)))
	// TLS 1.3 reports a refused client certificate at the first read.
	return &conn{c: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// TestTLS: the TCP transport serves TLS: initialize, calls inline and on
// the worker pool, pipelined, from several connections at once, and a
// message bigger than a record and than the assembly threshold.
func TestTLS(t *testing.T) {
	ca := testcert.NewCA(t, "ca")
	s, _ := tlsServer(t, ca, nil, tcp.Options{})
	var wg sync.WaitGroup
	for ci := range 4 {
		wg.Go(func() {
			c, err := dialTLS(t, s.addr, ca.Pool(), nil)
			if !assert.NoError(t, err) {
				return
			}
			c.init(t)
			var lines []string
			for i := range 50 {
				if i%2 == 0 {
					lines = append(lines, echoLine(i, fmt.Sprint(ci, "-", i)))
				} else {
					lines = append(lines, pechoLine(i, fmt.Sprint(ci, "-", i)))
				}
			}
			assert.NoError(t, c.write(lines...))
			seen := map[string]bool{}
			for range 50 {
				m, err := c.read()
				if !assert.NoError(t, err) {
					return
				}
				text, err := m.text()
				assert.NoError(t, err)
				seen[text] = true
			}
			assert.Len(t, seen, 50)
		})
	}
	wg.Wait()
	c, err := dialTLS(t, s.addr, ca.Pool(), nil)
	require.NoError(t, err)
	c.init(t)
	big := strings.Repeat("x", 200<<10)
	c.echo(t, 7, big)
	c.echo(t, 8, "after")
}

// TestTLSClientCertificates: with a client CA, a client whose certificate
// that CA signed is served; one without a certificate, or with one of
// another CA, fails its handshake, and the server goes on.
func TestTLSClientCertificates(t *testing.T) {
	ca, clients, other := testcert.NewCA(t, "ca"), testcert.NewCA(t, "clients"), testcert.NewCA(t, "other")
	s, _ := tlsServer(t, ca, clients, tcp.Options{})
	good, bad := clients.Client(t, "good"), other.Client(t, "bad")
	c, err := dialTLS(t, s.addr, ca.Pool(), &good.TLS)
	require.NoError(t, err)
	c.init(t)
	for name, cert := range map[string]*tls.Certificate{"none": nil, "other CA": &bad.TLS} {
		t.Run(name, func(t *testing.T) {
			c, err := dialTLS(t, s.addr, ca.Pool(), cert)
			if err == nil {
				err = c.write(initLine) // TLS 1.3: the client learns at its first read
				if err == nil {
					_, err = c.read()
				}
			}
			require.Error(t, err)
		})
	}
	c.echo(t, 1, "still served")
}

// TestTLSBadInput: plain text sent to the TLS port is answered with a
// JSON-RPC error in plain text and closed; a handshake that never
// completes is closed at ReadTimeout; a server certificate the client
// does not trust fails the client alone.
func TestTLSBadInput(t *testing.T) {
	ca := testcert.NewCA(t, "ca")
	s, _ := tlsServer(t, ca, nil, tcp.Options{ReadTimeout: 200 * time.Millisecond})
	t.Run("plain text", func(t *testing.T) {
		c := dial(t, s.addr)
		require.NoError(t, c.write(initLine))
		m, err := c.read()
		require.NoError(t, err)
		require.NotNil(t, m.Error)
		assert.Contains(t, m.Error.Message, "TLS")
		assert.True(t, c.closed())
	})
	for name, hello := range map[string]string{"silent": "", "half a hello": "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, s.addr)
			if hello != "" {
				_, err := io.WriteString(c.c, hello)
				require.NoError(t, err)
			}
			assert.True(t, c.closed(), "closed at the read timeout (the dial's deadline is 10 s)")
		})
	}
	t.Run("untrusted server", func(t *testing.T) {
		_, err := dialTLS(t, s.addr, testcert.NewCA(t, "stranger").Pool(), nil)
		require.Error(t, err)
	})
	c, err := dialTLS(t, s.addr, ca.Pool(), nil)
	require.NoError(t, err)
	c.init(t)
}

// TestTLSReload: a certificate stored while the server runs is served at
// the next handshake; connections open keep theirs.
func TestTLSReload(t *testing.T) {
	ca, ca2 := testcert.NewCA(t, "ca"), testcert.NewCA(t, "ca2")
	s, st := tlsServer(t, ca, nil, tcp.Options{})
	old, err := dialTLS(t, s.addr, ca.Pool(), nil)
	require.NoError(t, err)
	old.init(t)
	p := ca2.Server(t, "renewed")
	cfg, err := tlsconf.Files{Cert: p.CertFile, Key: p.KeyFile}.Load()
	require.NoError(t, err)
	st.Store(cfg)
	_, err = dialTLS(t, s.addr, ca.Pool(), nil)
	require.Error(t, err, "the old CA no longer verifies the server")
	c, err := dialTLS(t, s.addr, ca2.Pool(), nil)
	require.NoError(t, err)
	c.init(t)
	old.echo(t, 1, "kept")
}

// TestTLSLimits: the sweeper's limits hold on TLS connections as on the
// others: an idle connection is closed at IdleTimeout, a drain closes an
// idle one and serves one with a request in flight to its answer first.
func TestTLSLimits(t *testing.T) {
	ca := testcert.NewCA(t, "ca")
	t.Run("idle", func(t *testing.T) {
		s, _ := tlsServer(t, ca, nil, tcp.Options{IdleTimeout: 200 * time.Millisecond})
		c, err := dialTLS(t, s.addr, ca.Pool(), nil)
		require.NoError(t, err)
		c.init(t)
		m, err := c.read()
		require.NoError(t, err, "the idle timeout's error comes first")
		require.NotNil(t, m.Error)
		assert.Contains(t, string(m.Error.Data), "idle-timeout")
		assert.True(t, c.closed())
	})
	t.Run("drain", func(t *testing.T) {
		s, _ := tlsServer(t, ca, nil, tcp.Options{})
		idle, err := dialTLS(t, s.addr, ca.Pool(), nil)
		require.NoError(t, err)
		idle.init(t)
		busy, err := dialTLS(t, s.addr, ca.Pool(), nil)
		require.NoError(t, err)
		busy.init(t)
		require.NoError(t, busy.write(toolEcho("slow", 5, "")))
		<-s.started
		s.tcp.Drain()
		assert.True(t, idle.closed(), "the idle connection is closed")
		close(s.release)
		m, err := busy.read()
		require.NoError(t, err)
		text, err := m.text()
		require.NoError(t, err)
		assert.Equal(t, "released", text)
		assert.True(t, busy.closed(), "then closed once idle")
	})
}

func v2(t testing.TB, src string) string {
	h := proxyproto.HeaderProxyFromAddrs(2, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(src)), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7400})
	b, err := h.Format()
	require.NoError(t, err)
	return string(b)
}

// remotes records the client address of each session that initializes,
// where the engine serves it (a Receive middleware).
type remotes struct {
	mu sync.Mutex
	m  map[netip.Addr]int
}

func (r *remotes) middleware(next engine.MethodHandler) engine.MethodHandler {
	return func(ctx context.Context, req *engine.Request) ([]byte, error) {
		if req.Method == "initialize" {
			r.mu.Lock()
			r.m[req.Session.Remote()]++
			r.mu.Unlock()
		}
		return next(ctx, req)
	}
}

func (r *remotes) get() map[netip.Addr]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.m)
}

// TestProxyProtocolTCP: a trusted peer's PROXY header (v1, v2, over plain
// TCP and before TLS) names the client of its connection, which the
// session holds and the per-address connection limit counts (the proxy's
// own address is not limited); a header from an untrusted peer, or a
// malformed one, closes the connection unanswered; without a header a
// trusted peer's connection is its own.
func TestProxyProtocolTCP(t *testing.T) {
	newServer := func(t *testing.T, list string, withTLS bool) (*server, *testcert.CA, *remotes) {
		tr, err := proxied.Parse([]string{list})
		require.NoError(t, err)
		conns := netlimit.New(0, 1)
		conns.SetTrusted(tr)
		to := tcp.Options{Conns: conns, TrustedProxies: tr}
		ca := testcert.NewCA(t, "ca")
		r := &remotes{m: map[netip.Addr]int{}}
		eo := engine.Options{Receive: []engine.Middleware{r.middleware}}
		if withTLS {
			s, _ := tlsServer(t, ca, nil, to, eo)
			return s, ca, r
		}
		return start(t, eo, to), ca, r
	}
	connect := func(t *testing.T, s *server, ca *testcert.CA, withTLS bool, head string) *conn {
		c := dial(t, s.addr)
		if head != "" {
			_, err := io.WriteString(c.c, head)
			require.NoError(t, err)
		}
		if !withTLS {
			return c
		}
		tc := tls.Client(c.c, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
		return &conn{c: tc, r: bufio.NewReader(tc)}
	}
	for _, withTLS := range []bool{false, true} {
		t.Run(fmt.Sprint("tls=", withTLS), func(t *testing.T) {
			s, ca, r := newServer(t, "127.0.0.0/8", withTLS)
			a := connect(t, s, ca, withTLS, "PROXY TCP4 198.51.100.1 127.0.0.1 4711 7400\r\n")
			a.init(t)
			b := connect(t, s, ca, withTLS, v2(t, "[2001:db8::7]:4711"))
			b.init(t)
			own := connect(t, s, ca, withTLS, "")
			own.init(t)
			assert.Equal(t, map[netip.Addr]int{
				netip.MustParseAddr("198.51.100.1"): 1, netip.MustParseAddr("2001:db8::7"): 1, netip.MustParseAddr("127.0.0.1"): 1,
			}, r.get())
			again := connect(t, s, ca, withTLS, "PROXY TCP4 198.51.100.1 127.0.0.1 4712 7400\r\n")
			if withTLS {
				assert.Error(t, again.write(initLine+"\n"+initializedLine), "refused before TLS")
				_, err := again.read()
				assert.Error(t, err)
			} else {
				m, err := again.read()
				require.NoError(t, err)
				require.NotNil(t, m.Error)
				assert.Contains(t, string(m.Error.Data), "max-conns-per-ip")
				assert.True(t, again.closed())
			}
			a.echo(t, 1, "a")
			b.echo(t, 1, "b")
		})
	}
	for _, tc := range []struct{ name, list, head string }{
		{"untrusted", "10.0.0.0/8", "PROXY TCP4 198.51.100.1 127.0.0.1 4711 7400\r\n"},
		{"untrusted v2", "10.0.0.0/8", "\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c\xc6\x33\x64\x01\x7f\x00\x00\x01\x12\x67\x1c\xe9"},
		{"malformed", "127.0.0.0/8", "PROXY TCP4 198.51.100 127.0.0.1 1 2\r\n"},
		{"too long", "127.0.0.0/8", "PROXY TCP4 " + strings.Repeat("9", 200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, r := newServer(t, tc.list, false)
			c := dial(t, s.addr)
			require.NoError(t, c.write(tc.head+initLine))
			_, err := c.read()
			require.Error(t, err, "closed unanswered")
			assert.Empty(t, r.get(), "nothing served")
		})
	}
}
