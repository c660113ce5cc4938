#!/usr/bin/env node
// probe.mjs drives a server through the SDK call by call and prints every
// HTTP exchange (request, status, headers, body; SSE streams raw) as
// markdown: the shapes the suite relies on, to compare two servers.
// Usage: TARGET=langgraph|artifactr [ARTIFACTR_BIN=...] node tools/probe.mjs > shapes.md
import { Client } from "@langchain/langgraph-sdk";
import { startServer, TARGET } from "../lib/servers.mjs";

const log = [];
const interesting = ["content-type", "location", "content-location", "x-pagination-total", "x-pagination-next"];
async function loggingFetch(url, init = {}) {
  const u = new URL(url);
  const entry = { method: init.method ?? "GET", path: u.pathname + u.search, reqHeaders: {}, body: init.body };
  for (const [k, v] of Object.entries(init.headers ?? {})) if (/last-event-id|authorization|accept/i.test(k)) entry.reqHeaders[k] = v;
  const res = await fetch(url, init);
  entry.status = res.status;
  entry.resHeaders = Object.fromEntries([...res.headers].filter(([k]) => interesting.includes(k)));
  log.push(entry);
  if ((res.headers.get("content-type") ?? "").includes("text/event-stream")) {
    const [a, b] = res.body.tee();
    entry.sse = "";
    (async () => {
      const dec = new TextDecoder();
      for await (const chunk of b) entry.sse += dec.decode(chunk, { stream: true });
    })().catch((e) => (entry.sse += `\n<<cut: ${e.message}>>`));
    return new Response(a, { status: res.status, headers: res.headers });
  }
  const text = await res.text();
  entry.resBody = text;
  return new Response([101, 204, 205, 304].includes(res.status) ? null : text, { status: res.status, headers: res.headers });
}

const srv = await startServer({});
const client = new Client({ apiUrl: srv.url, apiKey: null, callerOptions: { maxRetries: 0, fetch: loggingFetch } });
const section = (title) => log.push({ title });
const tryit = async (f) => {
  try {
    return await f();
  } catch (e) {
    log.push({ note: `SDK threw: ${e.name}: ${e.message}` });
  }
};
const drain = async (gen) => {
  for await (const _ of gen);
};

try {
  section("assistants");
  await tryit(() => client.assistants.search({ limit: 10 }));
  await tryit(() => client.assistants.get("echo"));
  section("threads: create, get, update, search, count, copy, delete");
  const t = await client.threads.create({ threadId: "11111111-1111-4111-8111-111111111111", metadata: { user: "ada" } });
  await tryit(() => client.threads.create({ threadId: t.thread_id, ifExists: "raise" }));
  await tryit(() => client.threads.create({ threadId: t.thread_id, ifExists: "do_nothing" }));
  await client.threads.get(t.thread_id);
  await client.threads.update(t.thread_id, { metadata: { topic: "probe" } });
  await client.threads.search({ metadata: { user: "ada" }, limit: 10, offset: 0, sortBy: "created_at", sortOrder: "desc" });
  await tryit(() => client.threads.count({ metadata: { user: "ada" } }));
  section("runs.wait hello");
  await client.runs.wait(t.thread_id, "echo", { input: { messages: [{ role: "user", content: "hello" }] } });
  await client.threads.getState(t.thread_id);
  await client.threads.get(t.thread_id);
  await client.threads.getHistory(t.thread_id, { limit: 10 });
  const copy = await tryit(() => client.threads.copy(t.thread_id));
  if (copy) await client.threads.getState(copy.thread_id);
  await tryit(() => client.threads.get("22222222-2222-4222-8222-222222222222"));
  section("runs.stream, each mode (slow graph)");
  for (const mode of ["values", "updates", "messages-tuple", "events"]) {
    const th = await client.threads.create();
    await drain(client.runs.stream(th.thread_id, "slow", { input: { messages: [{ role: "user", content: "go" }] }, streamMode: mode }));
  }
  section("runs.stream, several modes at once (echo)");
  {
    const th = await client.threads.create();
    await drain(client.runs.stream(th.thread_id, "echo", { input: { messages: [{ role: "user", content: "hi" }] }, streamMode: ["values", "updates", "messages-tuple"] }));
  }
  section("interrupt and command.resume");
  {
    const th = await client.threads.create();
    await client.runs.wait(th.thread_id, "echo", { input: { messages: [{ role: "user", content: "ask: name?" }] } });
    await client.threads.get(th.thread_id);
    await client.threads.getState(th.thread_id);
    await drain(client.runs.stream(th.thread_id, "echo", { command: { resume: "Ada" }, streamMode: ["values", "updates"] }));
    await client.threads.getState(th.thread_id);
  }
  section("background run, get, list, join, joinStream");
  {
    const th = await client.threads.create();
    const run = await client.runs.create(th.thread_id, "slow", { input: { messages: [{ role: "user", content: "slow: 200" }] } });
    await client.runs.get(th.thread_id, run.run_id);
    await drain(client.runs.joinStream(th.thread_id, run.run_id, { streamMode: ["values", "messages-tuple"] }));
    await client.runs.join(th.thread_id, run.run_id);
    await client.runs.list(th.thread_id);
    await client.threads.getHistory(th.thread_id);
  }
  section("multitask reject");
  {
    const th = await client.threads.create();
    const r1 = await client.runs.create(th.thread_id, "slow", { input: { messages: [{ role: "user", content: "slow: 300" }] } });
    await tryit(() => client.runs.create(th.thread_id, "echo", { input: { messages: [{ role: "user", content: "x" }] }, multitaskStrategy: "reject" }));
    const r2 = await client.runs.create(th.thread_id, "echo", { input: { messages: [{ role: "user", content: "y" }] }, multitaskStrategy: "interrupt" });
    await client.runs.join(th.thread_id, r2.run_id);
    await client.runs.get(th.thread_id, r1.run_id);
  }
  section("cancel");
  {
    const th = await client.threads.create();
    const r1 = await client.runs.create(th.thread_id, "slow", { input: { messages: [{ role: "user", content: "slow: 500" }] } });
    await new Promise((r) => setTimeout(r, 300));
    await tryit(() => client.runs.cancel(th.thread_id, r1.run_id, true, "interrupt"));
    await client.runs.get(th.thread_id, r1.run_id);
    await client.threads.get(th.thread_id);
  }
  section("errors");
  await tryit(() => client.runs.wait(t.thread_id, "nope", { input: { messages: [{ role: "user", content: "x" }] } }));
  await tryit(() => client.runs.wait(t.thread_id, "echo", { command: { resume: "nobody asked" } }));
  await tryit(() => client.runs.wait(t.thread_id, "echo", { input: { messages: [{ role: "user", content: "fail: boom" }] } }));
  section("delete");
  await client.threads.delete(t.thread_id);
  await tryit(() => client.threads.get(t.thread_id));
} finally {
  await new Promise((r) => setTimeout(r, 200));
  await srv.close();
}

const out = [`# probe against ${TARGET}\n`];
const fence = (s) => "```\n" + s + "\n```";
const pretty = (s) => {
  try {
    return JSON.stringify(JSON.parse(s), null, 1);
  } catch {
    return s;
  }
};
for (const e of log) {
  if (e.title) out.push(`\n## ${e.title}\n`);
  else if (e.note) out.push(`_${e.note}_\n`);
  else {
    out.push(`### ${e.method} ${e.path} -> ${e.status}`);
    if (Object.keys(e.reqHeaders).length) out.push(`request headers: ${JSON.stringify(e.reqHeaders)}`);
    if (e.body) out.push("request:\n" + fence(e.body));
    out.push(`response headers: ${JSON.stringify(e.resHeaders)}`);
    if (e.sse != null) out.push("SSE:\n" + fence(e.sse.slice(0, 6000)));
    else if (e.resBody) out.push("response:\n" + fence(pretty(e.resBody).slice(0, 4000)));
    out.push("");
  }
}
process.stdout.write(out.join("\n") + "\n");
