// Harness of the console's end-to-end tests: artifactr serve processes
// (ARTIFACTR_BIN), an external nats-server (NATS_SERVER_BIN) for the
// takeover test, and headless Chromium (Debian's /usr/bin/chromium) through
// playwright-core. Every wait is for a condition, with a deadline.
import { spawn } from "node:child_process";
import net from "node:net";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, firefox } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));

export const shots = process.env.CONSOLE_SHOTS || join(tmpdir(), "artifactr-console-shots");
mkdirSync(shots, { recursive: true });

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run test/console/run.sh`);
  return v;
}

// start runs cmd and resolves once each pattern matched a line of its
// stdout, with the first group of each.
function start(cmd, args, patterns, name) {
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  const found = new Array(patterns.length).fill(undefined);
  let ready = false;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${name} did not start in 60 s; output:\n${out}`));
    }, 60_000);
    const onData = (d) => {
      out += d;
      if (ready) return;
      patterns.forEach((p, i) => { const m = out.match(p); if (m) found[i] = m[1] ?? m[0]; });
      if (found.every((f) => f !== undefined)) {
        ready = true;
        clearTimeout(timer);
        resolve({ child, found, output: () => out });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => {
      clearTimeout(timer);
      if (!ready) reject(new Error(`${name} exited with ${code} before it was ready:\n${out}`));
    });
  });
}

// config is the assistants file: echo, and a slow exec agent.
function config(dir) {
  const file = join(dir, "artifactr.json");
  writeFileSync(file, JSON.stringify({
    graphs: {
      echo: { agent: "echo" },
      slow: { agent: "exec", command: [process.execPath, join(here, "slow-agent.mjs")] },
    },
  }));
  return file;
}

// serve starts `artifactr serve` with the HTTP API and the console. With
// nats it uses that server; else it embeds one.
export async function serve({ auth = false, nats = "", ttl = "", extra = [] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "artifactr-console-"));
  const args = ["serve", "--log-level", "warn", "--config", config(dir), "--http", "127.0.0.1:0", "--idle-timeout", "60s"];
  if (nats) args.push("--nats", nats);
  else args.push("--data", join(dir, "data"), "--listen", "127.0.0.1:0", "--no-sync");
  if (auth) args.push("--auth");
  if (ttl) args.push("--claim-ttl", ttl);
  args.push(...extra);
  const p = await start(need("ARTIFACTR_BIN"), args, [/HTTP API listening on (http:\/\/\S+)/, /runner (\S+) ready/], "artifactr serve");
  const url = p.found[0];
  const s = {
    url, dir, child: p.child, runner: p.found[1], output: p.output,
    token: auth ? readFileSync(join(dir, "data", "auth", "http-client.token"), "utf8").trim() : "",
    async stop() {
      if (p.child.exitCode !== null) return;
      const done = new Promise((r) => p.child.once("exit", r));
      p.child.kill("SIGCONT");
      p.child.kill("SIGTERM");
      const t = setTimeout(() => p.child.kill("SIGKILL"), 15_000);
      await done;
      clearTimeout(t);
    },
  };
  return s;
}

// natsServer starts a JetStream nats-server on a free port.
export async function natsServer() {
  const dir = mkdtempSync(join(tmpdir(), "artifactr-console-nats-"));
  const p = await start(need("NATS_SERVER_BIN"), ["-js", "-sd", dir, "-a", "127.0.0.1", "-p", "-1"],
    [/Listening for client connections on (\S+)/], "nats-server");
  const done = new Promise((r) => p.child.once("exit", r));
  return {
    url: "nats://" + p.found[0],
    async stop() { p.child.kill("SIGTERM"); await done; },
  };
}

// proxy forwards TCP connections to upstream (nats://host:port) and can
// hold them: while held, nothing passes either way (the bytes wait in the
// sockets), as in a network partition; release lets it all through.
export async function proxy(upstream) {
  const { hostname, port } = new URL(upstream.replace(/^nats:/, "http:"));
  const pairs = new Set();
  let held = false;
  const srv = net.createServer((c) => {
    const u = net.connect(Number(port), hostname);
    const pair = [c, u];
    pairs.add(pair);
    c.pipe(u);
    u.pipe(c);
    if (held) pair.forEach((x) => x.pause());
    const drop = () => { pairs.delete(pair); c.destroy(); u.destroy(); };
    c.on("error", drop); u.on("error", drop); c.on("close", drop); u.on("close", drop);
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return {
    url: `nats://127.0.0.1:${srv.address().port}`,
    hold() { held = true; for (const p of pairs) p.forEach((x) => x.pause()); },
    release() { held = false; for (const p of pairs) p.forEach((x) => x.resume()); },
    async close() { for (const p of pairs) p.forEach((x) => x.destroy()); await new Promise((r) => srv.close(r)); },
  };
}

// api calls the server's HTTP API from the test itself.
export async function api(s, method, path, body) {
  const headers = { "Content-Type": "application/json" };
  if (s.token) headers.Authorization = "Bearer " + s.token;
  const res = await fetch(s.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

// until polls fn until it returns a truthy value, or fails after ms.
export async function until(what, fn, ms = 30_000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms (last: ${last})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

let browser;
// page opens a fresh page (its own context: no shared memory, no token);
// colorScheme ("light" or "dark") emulates the system's mode.
export async function page({ colorScheme } = {}) {
  browser ??= await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
      "--disable-sync", "--no-first-run", "--disable-quic"],
  });
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme });
  const pg = await ctx.newPage();
  pg.errors = [];
  pg.on("pageerror", (e) => pg.errors.push(String(e)));
  pg.on("dialog", (d) => { pg.errors.push("dialog: " + d.message()); d.dismiss(); });
  return pg;
}

export async function closeBrowser() {
  await browser?.close();
  browser = undefined;
  await fox?.close();
  fox = undefined;
}

let fox;
// firefoxPage opens a fresh page in Debian's Firefox ESR (FIREFOX, default
// /usr/bin/firefox-esr), driven over WebDriver BiDi: playwright's
// "moz-firefox" channel speaks the standard protocol that Firefox ships,
// not playwright's own patched-Firefox protocol. Playwright cannot emulate
// the colour scheme there, so with dark the browser itself is set to dark,
// through Firefox's own preference, for the whole launch.
export async function firefoxPage({ dark = false } = {}) {
  fox ??= await firefox.launch({
    channel: "moz-firefox",
    executablePath: process.env.FIREFOX || "/usr/bin/firefox-esr",
    headless: true,
    firefoxUserPrefs: dark ? { "layout.css.prefers-color-scheme.content-override": 0 } : {},
  });
  const ctx = await fox.newContext({ viewport: { width: 1280, height: 900 } });
  const pg = await ctx.newPage();
  pg.errors = [];
  pg.on("pageerror", (e) => pg.errors.push(String(e)));
  pg.on("dialog", (d) => { pg.errors.push("dialog: " + d.message()); d.dismiss(); });
  return pg;
}

export async function shot(pg, name) {
  const file = join(shots, name + ".png");
  await pg.screenshot({ path: file, fullPage: true });
  return file;
}
