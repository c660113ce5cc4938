// Threads: create, get, update, search, count, copy, delete; assistants.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, isArtifactr } from "./lib/servers.mjs";
import { newThreadId, say, convo, httpError } from "./lib/helpers.mjs";

let srv, client;
before(async () => {
  srv = await startServer();
  client = srv.client();
});
after(() => srv?.close());

test("assistants: the graph ids echo and slow are assistants", async () => {
  const found = await client.assistants.search({ limit: 10 });
  const graphs = found.map((a) => a.graph_id).sort();
  assert.ok(graphs.includes("echo") && graphs.includes("slow"), `graph ids ${graphs}`);
  const echo = await client.assistants.get("echo");
  assert.equal(echo.graph_id, "echo");
  assert.equal(typeof echo.assistant_id, "string");
  // The assistant's own id works as well as the graph id.
  assert.equal((await client.assistants.get(echo.assistant_id)).graph_id, "echo");
  assert.equal((await httpError(client.assistants.get("no-such-assistant"))).status, 404);
});

test("threads: create with id and metadata, get, if_exists", async () => {
  const id = newThreadId();
  const t = await client.threads.create({ threadId: id, metadata: { owner: "ada", case: "create" } });
  assert.equal(t.thread_id, id);
  assert.deepEqual(t.metadata, { owner: "ada", case: "create" });
  assert.equal(t.status, "idle");
  for (const k of ["created_at", "updated_at"]) assert.ok(!Number.isNaN(Date.parse(t[k])), `${k}: ${t[k]}`);

  const got = await client.threads.get(id);
  assert.equal(got.thread_id, id);
  assert.deepEqual(got.metadata, t.metadata);
  assert.equal(got.status, "idle");

  // raise: a second create of the same id is a conflict.
  assert.equal((await httpError(client.threads.create({ threadId: id, ifExists: "raise" }))).status, 409);
  // do_nothing: the existing thread comes back unchanged.
  const again = await client.threads.create({ threadId: id, ifExists: "do_nothing", metadata: { owner: "bob" } });
  assert.equal(again.thread_id, id);
  assert.equal(again.metadata.owner, "ada");

  // Without an id the server picks one.
  const anon = await client.threads.create();
  assert.equal(typeof anon.thread_id, "string");
  assert.notEqual(anon.thread_id, id);

  assert.equal((await httpError(client.threads.get(newThreadId()))).status, 404);
});

test("threads: update merges metadata", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id, metadata: { owner: "ada" } });
  const u = await client.threads.update(id, { metadata: { topic: "update" } });
  assert.deepEqual(u.metadata, { owner: "ada", topic: "update" });
  assert.deepEqual((await client.threads.get(id)).metadata, { owner: "ada", topic: "update" });
  assert.equal((await httpError(client.threads.update(newThreadId(), { metadata: { a: 1 } }))).status, 404);
});

test("threads: search by metadata and status, limit/offset, sorting; count", async () => {
  const tag = newThreadId(); // metadata value unique to this test
  const ids = [];
  for (let i = 0; i < 3; i++) {
    const t = await client.threads.create({ threadId: newThreadId(), metadata: { suite: tag, i } });
    ids.push(t.thread_id);
  }
  // One of them gets a run, so its updated_at moves past the others'.
  await client.runs.wait(ids[0], "echo", { input: say("hello") });

  const all = await client.threads.search({ metadata: { suite: tag }, limit: 10 });
  assert.deepEqual(all.map((t) => t.thread_id).sort(), [...ids].sort(), JSON.stringify(all));

  const byCreatedDesc = await client.threads.search({ metadata: { suite: tag }, sortBy: "created_at", sortOrder: "desc", limit: 10 });
  assert.deepEqual(byCreatedDesc.map((t) => t.thread_id), [...ids].reverse());
  const byCreatedAsc = await client.threads.search({ metadata: { suite: tag }, sortBy: "created_at", sortOrder: "asc", limit: 10 });
  assert.deepEqual(byCreatedAsc.map((t) => t.thread_id), ids);
  const byUpdated = await client.threads.search({ metadata: { suite: tag }, sortBy: "updated_at", sortOrder: "desc", limit: 10 });
  assert.equal(byUpdated[0].thread_id, ids[0], `by updated_at desc: ${JSON.stringify(byUpdated.map((t) => [t.thread_id, t.updated_at, t.status]))}, ran on ${ids[0]}`);

  const page1 = await client.threads.search({ metadata: { suite: tag }, sortBy: "created_at", sortOrder: "asc", limit: 2, offset: 0 });
  const page2 = await client.threads.search({ metadata: { suite: tag }, sortBy: "created_at", sortOrder: "asc", limit: 2, offset: 2 });
  assert.deepEqual([...page1, ...page2].map((t) => t.thread_id), ids);

  const one = await client.threads.search({ metadata: { suite: tag, i: 1 } });
  assert.deepEqual(one.map((t) => t.thread_id), [ids[1]]);
  const idle = await client.threads.search({ metadata: { suite: tag }, status: "idle", limit: 10 });
  assert.equal(idle.length, 3, `idle: ${JSON.stringify(idle.map((t) => [t.thread_id, t.status]))}; all: ${JSON.stringify(all.map((t) => [t.thread_id, t.status]))}`);
  const busy = await client.threads.search({ metadata: { suite: tag }, status: "busy", limit: 10 });
  assert.equal(busy.length, 0);

  assert.equal(await client.threads.count({ metadata: { suite: tag } }), 3);
  assert.equal(await client.threads.count({ metadata: { suite: tag, i: 2 } }), 1);
  assert.equal(await client.threads.count({ metadata: { suite: newThreadId() } }), 0);
});

test("threads: copy forks at the latest state", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id, metadata: { owner: "ada" } });
  await client.runs.wait(id, "echo", { input: say("hello") });
  const copy = await client.threads.copy(id);
  assert.notEqual(copy.thread_id, id);
  assert.equal(copy.metadata.owner, "ada");
  const state = await client.threads.getState(copy.thread_id);
  assert.deepEqual(convo(state.values), [["human", "hello"], ["ai", "echo: hello"]]);
  // The copy goes on by itself; the original is untouched.
  await client.runs.wait(copy.thread_id, "echo", { input: say("more") });
  assert.equal(convo((await client.threads.getState(copy.thread_id)).values).length, 4);
  assert.equal(convo((await client.threads.getState(id)).values).length, 2);
  // LangGraph's JS server answers 409 "Thread not found" here; artifactr 404.
  assert.equal((await httpError(client.threads.copy(newThreadId()))).status, isArtifactr ? 404 : 409);
});

test("threads: delete", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  await client.runs.wait(id, "echo", { input: say("hello") });
  await client.threads.delete(id);
  assert.equal((await httpError(client.threads.get(id))).status, 404);
  assert.equal((await httpError(client.threads.getState(id))).status, 404);
  const after = await client.threads.search({ limit: 1000 });
  assert.ok(!after.some((t) => t.thread_id === id), "a deleted thread is not found by search");
  if (isArtifactr) {
    // artifactr: a delete is a tombstone, not erasure; the id stays taken.
    assert.equal((await httpError(client.threads.create({ threadId: id }))).status, 409);
  }
  assert.equal((await httpError(client.threads.delete(newThreadId()))).status, 404);
});

test("errors have a detail body (artifactr)", { skip: !isArtifactr && "LangGraph's JS server answers errors as text/plain" }, async () => {
  const e = await httpError(client.threads.get(newThreadId()));
  const body = JSON.parse(e.text);
  assert.equal(typeof body.detail, "string");
});

test("threads: search and count see a write at once (read your writes)", async () => {
  // Four clients at once, each creating, running and updating threads and
  // searching right after each write. (artifactr's search reads a read model
  // filled after the write; it must still answer with the write in.)
  let n = 0;
  await Promise.all([0, 1, 2, 3].map(async (k) => {
    for (let i = 0; i < 10; i++) {
      const tag = newThreadId();
      const id = newThreadId();
      await client.threads.create({ threadId: id, metadata: { tag } });
      const found = (await client.threads.search({ metadata: { tag } })).map((t) => t.thread_id);
      if (found.length !== 1) {
        // Say whether the thread turns up later (lag) or not at all.
        const later = (await client.threads.search({ metadata: { tag } })).length;
        assert.fail(`search right after creating ${id} found ${JSON.stringify(found)}; a second search found ${later}; client ${k}, create ${i}`);
      }
      await client.runs.wait(id, "echo", { input: say("hello") });
      assert.equal((await client.threads.search({ metadata: { tag }, status: "idle" })).length, 1, "idle after the run");
      await client.threads.update(id, { metadata: { step: i } });
      assert.equal(await client.threads.count({ metadata: { tag, step: i } }), 1, "after update");
      n++;
    }
  }));
  assert.equal(n, 40);
});
