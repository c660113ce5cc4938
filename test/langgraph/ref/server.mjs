#!/usr/bin/env node
// Starts LangGraph's own JS server (the in-memory dev server of
// @langchain/langgraph-api) on loopback with the echo and slow graphs, and
// prints "LangGraph API listening on http://HOST:PORT" once it serves.
// Usage: node ref/server.mjs [WORKDIR]   (WORKDIR holds its .langgraph_api files)
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

process.env.LOG_LEVEL ??= "warn";
// No tracing: nothing leaves loopback.
for (const k of ["LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING", "LANGCHAIN_TRACING_V2"]) delete process.env[k];

const { startServer } = await import("@langchain/langgraph-api/server");
const here = dirname(fileURLToPath(import.meta.url));
const cwd = process.argv[2] ?? mkdtempSync(join(tmpdir(), "langgraph-ref-"));
const graphs = join(here, "graphs.mjs");
const { host, cleanup } = await startServer({
  port: 0,
  nWorkers: 10,
  host: "127.0.0.1",
  cwd,
  graphs: { echo: `${graphs}:echo`, slow: `${graphs}:slow` },
});
console.log(`LangGraph API listening on http://${host}`);
const stop = async () => {
  await cleanup();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
