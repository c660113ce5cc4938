// Access under serve --auth: 401 without a valid token, 403 for a write with
// the auditor's token. artifactr only: LangGraph's dev server has no such
// built-in tokens (its auth is a user-written handler).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, isArtifactr, makeClient } from "./lib/servers.mjs";
import { newThreadId, say, textOf, lastMessage, httpError } from "./lib/helpers.mjs";

const skip = !isArtifactr && "artifactr only: LangGraph's server has no built-in tokens";
let srv;
before(async () => {
  if (!skip) srv = await startServer({ auth: true });
});
after(() => srv?.close());

test("auth: the token files exist, mode 0600", { skip }, async () => {
  const { statSync } = await import("node:fs");
  const { join } = await import("node:path");
  for (const f of ["http-client.token", "http-auditor.token"]) {
    const st = statSync(join(srv.dataDir, "auth", f));
    assert.equal(st.mode & 0o777, 0o600, `${f} mode ${(st.mode & 0o777).toString(8)}`);
  }
  assert.ok(srv.tokens.client && srv.tokens.auditor);
  assert.notEqual(srv.tokens.client, srv.tokens.auditor);
});

test("auth: no token or a wrong one is 401, with a detail", { skip }, async () => {
  for (const token of [undefined, "wrong-token", srv?.tokens.client + "x"]) {
    const c = makeClient(srv.url, { token });
    for (const call of [() => c.threads.search({}), () => c.threads.create({ threadId: newThreadId() }), () => c.assistants.search({})]) {
      const e = await httpError(call());
      assert.equal(e.status, 401, `token ${token}: ${e.status} ${e.text}`);
      assert.equal(typeof JSON.parse(e.text).detail, "string");
    }
  }
  // Not a bearer token at all.
  const basic = makeClient(srv.url, { headers: { Authorization: "Basic dXNlcjpwYXNz" } });
  assert.equal((await httpError(basic.threads.search({}))).status, 401);
});

test("auth: the client token posts and reads", { skip }, async () => {
  const c = srv.client();
  const id = newThreadId();
  await c.threads.create({ threadId: id });
  const values = await c.runs.wait(id, "echo", { input: say("hello") });
  assert.equal(textOf(lastMessage(values)), "echo: hello");
});

test("auth: the auditor token reads, and a write is 403 that writes nothing", { skip }, async () => {
  const c = srv.client();
  const id = newThreadId();
  await c.threads.create({ threadId: id, metadata: { who: "client" } });
  await c.runs.wait(id, "echo", { input: say("hello") });

  const a = makeClient(srv.url, { token: srv.tokens.auditor });
  assert.equal((await a.threads.get(id)).thread_id, id);
  assert.equal(textOf(lastMessage((await a.threads.getState(id)).values)), "echo: hello");
  assert.ok((await a.threads.search({ limit: 100 })).some((t) => t.thread_id === id));
  await a.threads.getHistory(id);
  await a.runs.list(id);

  const writes = [
    ["create thread", () => a.threads.create({ threadId: newThreadId() })],
    ["run", () => a.runs.create(id, "echo", { input: say("from the auditor") })],
    ["wait", () => a.runs.wait(id, "echo", { input: say("from the auditor") })],
    ["update", () => a.threads.update(id, { metadata: { who: "auditor" } })],
    ["delete", () => a.threads.delete(id)],
  ];
  for (const [what, call] of writes) {
    const e = await httpError(call());
    assert.equal(e.status, 403, `${what}: ${e.status} ${e.text}`);
    assert.equal(typeof JSON.parse(e.text).detail, "string");
  }
  // None of them wrote anything.
  const t = await c.threads.get(id);
  assert.equal(t.metadata.who, "client");
  assert.equal((await c.threads.getState(id)).values.messages.length, 2);
});

test("auth: the SDK's apiKey option (x-api-key) works as the bearer token does", { skip }, async () => {
  const c = makeClient(srv.url, { apiKey: srv.tokens.client });
  const id = newThreadId();
  await c.threads.create({ threadId: id });
  assert.equal(textOf(lastMessage(await c.runs.wait(id, "echo", { input: say("hello") }))), "echo: hello");
  const a = makeClient(srv.url, { apiKey: srv.tokens.auditor });
  assert.equal((await a.threads.get(id)).thread_id, id);
  assert.equal((await httpError(a.threads.create({ threadId: newThreadId() }))).status, 403);
  assert.equal((await httpError(makeClient(srv.url, { apiKey: "wrong" }).threads.get(id))).status, 401);
});

test("auth: the README's quickstart runs with ARTIFACTR_TOKEN, and is refused without", { skip }, async () => {
  const { runQuickstart } = await import("./lib/quickstart.mjs");
  assert.equal(await runQuickstart(srv.url, srv.tokens.client), "echo: hello\nasks: what is your name?\necho: what is your name? -> Ada\n");
  await assert.rejects(runQuickstart(srv.url, ""), /401/);
});
