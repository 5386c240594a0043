// The MCP Inspector's web UI in a real headless browser, connecting
// cross-origin to mcpedge and listing its tools (issue 23, CORS).
//
// The Inspector's static web client (@modelcontextprotocol/inspector,
// pinned in package.json) is served on http://localhost:UI; mcpedge serves
// Streamable HTTP on http://127.0.0.1:MCP with -cors-origins naming the
// UI's origin. Debian's Chromium (never a downloaded browser), driven by
// playwright-core, opens the UI with the Inspector's "direct" connection
// type (no Inspector proxy: the page's own fetches cross origins, so
// every request is preflighted), connects, lists the tools and finds the
// demo set's. A second page from an origin not listed fails to connect.
//
// It skips, saying why, where Chromium, the npm packages or bin/mcpedge
// are missing, except in CI, which installs them all and where it fails
// (make interop-browser). The Inspector
// is its 1.x line, the last whose web client connects directly; 2.x sends
// every request through its own server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
const mcpedge = process.env.MCPEDGE_BIN || join(root, "bin", "mcpedge");
const require = createRequire(import.meta.url);

function missing() {
  if (!existsSync(chromium)) return `no Chromium at ${chromium} (apt-get install chromium)`;
  if (!existsSync(mcpedge)) return `no ${mcpedge} (make build)`;
  for (const m of ["playwright-core", "@modelcontextprotocol/inspector-client/package.json"]) {
    try {
      require.resolve(m);
    } catch {
      return `npm package ${m} missing (cd interop/inspector && npm ci)`;
    }
  }
  return "";
}

// freePort asks the system for a free loopback port.
function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// start runs a child and resolves once its output matches ready; the
// child is killed when the test ends.
function start(t, cmd, args, env, ready) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    const timer = setTimeout(() => reject(new Error(`${cmd} did not start:\n${out}`)), 20000);
    const onData = (b) => {
      out += b;
      if (ready.test(out)) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${cmd} exited ${code}:\n${out}`));
    });
    t.after(() => {
      child.removeAllListeners("exit");
      child.kill("SIGTERM");
    });
  });
}

// In CI (CI=true) nothing may be missing: the test fails instead.
const why = missing();
if (why && process.env.CI) {
  test("interop-browser has what it needs in CI", () => assert.fail(why));
}

test("the MCP Inspector in Chromium lists mcpedge's tools across origins", { skip: why || false, timeout: 120000 }, async (t) => {
  const { chromium: pw } = await import("playwright-core");
  const [uiPort, mcpPort] = [await freePort(), await freePort()];
  const uiOrigin = `http://localhost:${uiPort}`;
  await start(t, mcpedge, ["-tcp", "", "-admin", "", "-http", `127.0.0.1:${mcpPort}`, "-handlers", "demo", "-cors-origins", uiOrigin],
    {}, /serving MCP over Streamable HTTP/);
  const clientBin = join(dirname(require.resolve("@modelcontextprotocol/inspector-client/package.json")), "bin", "client.js");
  await start(t, process.execPath, [clientBin], { CLIENT_PORT: String(uiPort), HOST: "localhost", MCP_AUTO_OPEN_ENABLED: "false" },
    /Inspector is up and running/);

  const profile = mkdtempSync(join(tmpdir(), "mcpedge-chromium-"));
  t.after(() => rmSync(profile, { recursive: true, force: true }));
  const ctx = await pw.launchPersistentContext(profile, {
    executablePath: chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  t.after(() => ctx.close());
  // The Inspector's direct connection: the browser itself talks to the
  // server, as any web client on another origin would.
  await ctx.addInitScript(() => localStorage.setItem("lastConnectionType", "direct"));
  // What mcpedge answered the page: each answer carries the grant.
  const grants = [];
  ctx.on("response", async (r) => {
    if (r.url().startsWith(`http://127.0.0.1:${mcpPort}/`)) grants.push(await r.headerValue("access-control-allow-origin"));
  });

  const page = await ctx.newPage();
  const serverUrl = `http://127.0.0.1:${mcpPort}/mcp`;
  await page.goto(`${uiOrigin}/?transport=streamable-http&serverUrl=${encodeURIComponent(serverUrl)}`);
  // The form holds the URL from the query (the app has started) before
  // Connect is pressed.
  await page.locator(`input[value="${serverUrl}"]`).first().waitFor({ timeout: 30000 });
  await page.getByRole("button", { name: "Connect", exact: true }).click();
  await page.getByText("Connected", { exact: true }).waitFor({ timeout: 30000 });
  await page.getByRole("tab", { name: "Tools" }).click({ timeout: 30000 });
  await page.getByRole("button", { name: "List Tools" }).click();
  // The demo set's tools, listed by the page from mcpedge's answer.
  for (const tool of ["hash", "count", "board_write"]) {
    await page.getByText(tool, { exact: true }).first().waitFor({ timeout: 30000 });
  }
  assert.ok(grants.length >= 3, `the page talked to mcpedge itself (${grants.length} answers)`);
  for (const g of grants) assert.equal(g, uiOrigin, "every answer grants the UI's origin");

  // An origin the list does not name: the preflight is refused and the
  // page cannot connect.
  const strangerPort = await freePort();
  await start(t, process.execPath, [clientBin], { CLIENT_PORT: String(strangerPort), HOST: "localhost", MCP_AUTO_OPEN_ENABLED: "false" },
    /Inspector is up and running/);
  const other = await ctx.newPage();
  await other.goto(`http://localhost:${strangerPort}/?transport=streamable-http&serverUrl=${encodeURIComponent(serverUrl)}`);
  await other.locator(`input[value="${serverUrl}"]`).first().waitFor({ timeout: 30000 });
  await other.getByRole("button", { name: "Connect", exact: true }).click();
  await other.getByText(/Connection error/i).first().waitFor({ timeout: 30000 });
  assert.equal(await other.getByRole("tab", { name: "Tools" }).count(), 0, "no tools for a stranger");
});

if (why) console.log(`# interop-browser skipped: ${why}`);
