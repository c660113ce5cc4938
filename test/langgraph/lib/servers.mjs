// Harnesses for the two servers the suite runs against, chosen by env TARGET:
//   TARGET=langgraph  LangGraph's own JS server (ref/server.mjs), in memory;
//   TARGET=artifactr  $ARTIFACTR_BIN serve --http, with the echo agent and the
//                     suite's slow exec agent (agents/slow-agent.mjs).
// Both listen on 127.0.0.1 at a free port and print the URL on stdout.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";

const here = dirname(fileURLToPath(import.meta.url));
export const suiteDir = dirname(here);

/** The server the suite runs against: "artifactr" or "langgraph". */
export const TARGET = process.env.TARGET ?? "langgraph";
if (!["artifactr", "langgraph"].includes(TARGET)) throw new Error(`TARGET=${TARGET}: want artifactr or langgraph`);
export const isArtifactr = TARGET === "artifactr";
export const isLangGraph = TARGET === "langgraph";

const startTimeoutMs = 60_000;

// spawnAndWait starts a process and resolves once every pattern has matched a
// stdout line, with the first pattern's first capture group.
function spawnAndWait(cmd, args, { patterns, env, name }) {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  const lines = [];
  child.stderr.on("data", (d) => {
    err += d;
    if (err.length > 64 << 10) err = err.slice(-32 << 10);
  });
  const ready = new Promise((resolve, reject) => {
    const seen = new Array(patterns.length).fill(null);
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${name}: not ready after ${startTimeoutMs} ms\nstdout:\n${lines.join("\n")}\nstderr:\n${err}`));
    }, startTimeoutMs);
    child.stdout.on("data", (d) => {
      out += d;
      let i;
      while ((i = out.indexOf("\n")) >= 0) {
        const line = out.slice(0, i);
        out = out.slice(i + 1);
        lines.push(line);
        if (process.env.SUITE_VERBOSE) process.stderr.write(`[${name}] ${line}\n`);
        patterns.forEach((p, k) => {
          const m = seen[k] == null && p.exec(line);
          if (m) seen[k] = m;
        });
        if (seen.every(Boolean)) {
          clearTimeout(timer);
          resolve(seen[0][1]);
        }
      }
    });
    child.on("exit", (code, sig) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? sig}) before it was ready\nstdout:\n${lines.join("\n")}\nstderr:\n${err}`));
    });
  });
  const exited = new Promise((resolve) => child.on("exit", (code, sig) => resolve(code ?? sig)));
  return { child, ready, exited, stderr: () => err, stdout: () => lines.join("\n") };
}

async function stopProcess(p, signal = "SIGTERM") {
  if (p.child.exitCode != null || p.child.signalCode != null) return p.exited;
  p.child.kill(signal);
  const t = setTimeout(() => p.child.kill("SIGKILL"), 15_000);
  const code = await p.exited;
  clearTimeout(t);
  return code;
}

/** The artifactr config the suite serves: echo and the slow exec agent. */
export function artifactrConfig() {
  return {
    graphs: {
      echo: { agent: "echo" },
      slow: { agent: "exec", command: [process.execPath, join(suiteDir, "agents", "slow-agent.mjs")] },
    },
  };
}

/**
 * Starts the TARGET server. opts.auth (artifactr only) serves with --auth.
 * Returns { url, client(opts), tokens, restart(), stop(), dataDir }.
 */
export async function startServer(opts = {}) {
  return isArtifactr ? startArtifactr(opts) : startLangGraph(opts);
}

async function startLangGraph() {
  const work = mkdtempSync(join(tmpdir(), "h24-langgraph-"));
  let proc;
  const srv = {
    kind: "langgraph",
    url: "",
    tokens: {},
    async start() {
      proc = spawnAndWait(process.execPath, [join(suiteDir, "ref", "server.mjs"), work], {
        patterns: [/LangGraph API listening on (http:\/\/\S+)/],
        name: "langgraph",
      });
      srv.url = await proc.ready;
    },
    async stop() {
      if (proc) await stopProcess(proc);
    },
    async restart() {
      await srv.stop();
      await srv.start();
    },
    async close() {
      await srv.stop();
      rmSync(work, { recursive: true, force: true });
    },
    client: (o) => makeClient(srv.url, o),
    logs: () => (proc ? proc.stdout() + "\n" + proc.stderr() : ""),
  };
  await srv.start();
  return srv;
}

async function startArtifactr({ auth = false, config = artifactrConfig(), extraArgs = [] } = {}) {
  const bin = process.env.ARTIFACTR_BIN;
  if (!bin) throw new Error("TARGET=artifactr needs ARTIFACTR_BIN: the path of a built artifactr binary");
  const work = mkdtempSync(join(tmpdir(), "h24-artifactr-"));
  const data = join(work, "data");
  const cfg = join(work, "artifactr.json");
  writeFileSync(cfg, JSON.stringify(config, null, 2));
  const args = ["serve", "--data", data, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--config", cfg,
    "--claim-ttl", "2s", "--shutdown-grace", "2s", ...(auth ? ["--auth"] : []), ...extraArgs];
  let proc;
  const srv = {
    kind: "artifactr",
    url: "",
    dataDir: data,
    tokens: {},
    async start() {
      proc = spawnAndWait(bin, args, {
        patterns: [/HTTP API listening on (http:\/\/\S+)/, /runner .* ready/],
        name: "artifactr",
      });
      srv.url = await proc.ready;
      if (auth) {
        for (const [role, file] of [["client", "http-client.token"], ["auditor", "http-auditor.token"]]) {
          const p = join(data, "auth", file);
          if (existsSync(p)) srv.tokens[role] = readFileSync(p, "utf8").trim();
        }
      }
    },
    async stop() {
      if (proc) return stopProcess(proc);
    },
    /** kill -9, as a crash. */
    async kill() {
      if (proc) return stopProcess(proc, "SIGKILL");
    },
    async restart() {
      await srv.stop();
      await srv.start();
    },
    async close() {
      await srv.stop();
      rmSync(work, { recursive: true, force: true });
    },
    client: (o) => makeClient(srv.url, { token: auth ? srv.tokens.client : undefined, ...o }),
    logs: () => (proc ? proc.stdout() + "\n" + proc.stderr() : ""),
  };
  await srv.start();
  return srv;
}

/**
 * An SDK client for url; opts.token is sent as a bearer token, opts.apiKey
 * through the SDK's own apiKey option (an x-api-key header).
 */
export function makeClient(url, { token, apiKey = null, maxRetries = 0, headers = {} } = {}) {
  return new Client({
    apiUrl: url,
    apiKey,
    defaultHeaders: { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...headers },
    callerOptions: { maxRetries },
  });
}
