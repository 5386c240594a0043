'use strict';
// Preloaded by run-client.sh (node --require) into the conformance suite:
// every server the suite starts listens on loopback only. Its mock
// servers call listen(0) with no host, which binds every interface; here
// a missing or wildcard host becomes 127.0.0.1, a host that is not
// loopback is refused (an exception), and a server that ends up bound
// anywhere else is closed and fails the run. This needs neither root nor
// a network namespace, so the client scenarios run as any user.
//
// Run directly (node loopback.cjs), it checks itself: run-client.sh does
// so before the scenarios.

const dns = require('node:dns');
const net = require('node:net');

const LOOPBACK = '127.0.0.1';

function isLoopback(host) {
  return host === 'localhost' || host === '::1' || host === '::ffff:127.0.0.1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

function isWildcard(host) {
  return host === undefined || host === null || host === '' || host === '0.0.0.0' || host === '::';
}

// loopbackHost returns the host a server may listen on in place of host.
function loopbackHost(host) {
  if (isWildcard(host)) return LOOPBACK;
  if (isLoopback(host)) return host;
  throw new Error(`conformance: a server asked to listen on ${host}: only loopback is allowed here`);
}

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (typeof first === 'function' || (args.length === 0)) {
    // listen([callback]): a random port on every interface.
    args.unshift(0, LOOPBACK);
  } else if (first !== null && typeof first === 'object') {
    // listen(options[, callback]); a handle or a Unix socket path is
    // local already.
    if (first.path === undefined && first.fd === undefined && first._handle === undefined && !(first instanceof net.Server)) {
      args[0] = { ...first, host: loopbackHost(first.host) };
    }
  } else if (typeof first === 'number' || first === undefined || first === null || /^\d+$/.test(String(first))) {
    // listen(port[, host][, backlog][, callback])
    if (typeof args[1] === 'string') {
      args[1] = loopbackHost(args[1]);
    } else {
      args.splice(1, 0, LOOPBACK);
    }
  }
  this.once('listening', () => {
    const a = this.address();
    if (a !== null && typeof a === 'object' && !isLoopback(a.address)) {
      this.close();
      throw new Error(`conformance: a server listens on ${a.address}:${a.port}, not loopback`);
    }
  });
  // A host makes net look it up (dns.lookup, asynchronously) before it
  // binds, while a bare listen(0) binds at once: the suite reads
  // server.address() right after listen. An IP literal needs no lookup, so
  // it is answered at once, and the server is bound when listen returns,
  // as without a host.
  const lookup = dns.lookup;
  dns.lookup = function (host, ...rest) {
    const family = net.isIP(host);
    const cb = rest[rest.length - 1];
    const all = rest.length > 1 && rest[0] !== null && typeof rest[0] === 'object' && rest[0].all;
    if (family !== 0 && typeof cb === 'function') {
      if (all) cb(null, [{ address: host, family }]);
      else cb(null, host, family);
      return {};
    }
    return lookup.call(this, host, ...rest);
  };
  try {
    return listen.apply(this, args);
  } finally {
    dns.lookup = lookup;
  }
};

// selfTest listens in each way the suite (express, http, hono) can, and
// checks that each lands on loopback and that a foreign host is refused.
async function selfTest() {
  const http = require('node:http');
  const ways = [
    (s, cb) => s.listen(0, cb),
    (s, cb) => s.listen(cb),
    (s, cb) => s.listen(0, '0.0.0.0', cb),
    (s, cb) => s.listen(0, '::', cb),
    (s, cb) => s.listen({ port: 0 }, cb),
    (s, cb) => s.listen({ port: 0, host: '::' }, cb),
    (s, cb) => s.listen(0, 511, cb),
  ];
  for (const [i, way] of ways.entries()) {
    const s = http.createServer();
    const listening = new Promise((resolve, reject) => {
      s.once('error', reject);
      way(s, resolve);
    });
    const addr = s.address(); // bound when listen returns, as the suite expects
    await listening;
    if (addr === null) throw new Error(`way ${i}: not bound when listen returned`);
    await new Promise((resolve) => s.close(resolve));
    if (addr.address !== LOOPBACK) {
      throw new Error(`way ${i}: listened on ${addr.address}`);
    }
  }
  let refused = false;
  try {
    net.createServer().listen(0, '192.0.2.1');
  } catch {
    refused = true;
  }
  if (!refused) throw new Error('a non-loopback host was not refused');
}

if (require.main === module) {
  selfTest().then(
    () => console.log(`loopback: every way of listening binds ${LOOPBACK}`),
    (err) => {
      console.error('loopback:', err.message);
      process.exit(1);
    },
  );
}
