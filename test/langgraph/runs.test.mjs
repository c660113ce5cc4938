// Runs: wait, background runs, join, interrupt and command.resume, failures,
// history and a run from a checkpoint.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, isArtifactr } from "./lib/servers.mjs";
import { newThreadId, say, convo, textOf, lastMessage, httpError, RUN_STATUSES } from "./lib/helpers.mjs";

let srv, client;
before(async () => {
  srv = await startServer();
  client = srv.client();
});
after(() => srv?.close());

test("runs.wait returns echo: hello", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  let created;
  const values = await client.runs.wait(id, "echo", { input: say("hello"), onRunCreated: (m) => (created = m) });
  const last = lastMessage(values);
  assert.equal(last.type, "ai");
  assert.equal(textOf(last), "echo: hello");
  assert.deepEqual(convo(values), [["human", "hello"], ["ai", "echo: hello"]]);
  // The run is known by the id the response named.
  assert.equal(created.thread_id, id);
  const run = await client.runs.get(id, created.run_id);
  assert.equal(run.status, "success");
  assert.equal(run.thread_id, id);

  const state = await client.threads.getState(id);
  assert.deepEqual(convo(state.values), [["human", "hello"], ["ai", "echo: hello"]]);
  assert.deepEqual(state.next, []);
  assert.equal(typeof state.checkpoint.checkpoint_id, "string");
  const t = await client.threads.get(id);
  assert.equal(t.status, "idle");
});

test("runs.wait with if_not_exists create makes the thread", async () => {
  const id = newThreadId();
  const values = await client.runs.wait(id, "echo", { input: say("hi"), ifNotExists: "create" });
  assert.equal(textOf(lastMessage(values)), "echo: hi");
  assert.equal((await client.threads.get(id)).thread_id, id);
});

test("a run on an unknown thread or assistant is 404 and writes nothing", async () => {
  // LangGraph's JS server answers 422 for a run on a thread that does not
  // exist (with a "thread is already running" text); artifactr 404.
  assert.equal((await httpError(client.runs.wait(newThreadId(), "echo", { input: say("x") }))).status, isArtifactr ? 404 : 422);
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  assert.equal((await httpError(client.runs.wait(id, "no-such-assistant", { input: say("x") }))).status, 404);
  const state = await client.threads.getState(id);
  assert.deepEqual(convo(state.values), []);
  assert.deepEqual(await client.runs.list(id), []);
});

test("background run: create, get, list, join", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  const run = await client.runs.create(id, "slow", { input: say("go") });
  assert.equal(run.thread_id, id);
  assert.equal(typeof run.run_id, "string");
  assert.ok(["pending", "running"].includes(run.status), `status ${run.status}`);
  const got = await client.runs.get(id, run.run_id);
  assert.equal(got.run_id, run.run_id);
  assert.ok(RUN_STATUSES.includes(got.status), got.status);
  const values = await client.runs.join(id, run.run_id);
  assert.equal(textOf(lastMessage(values)), "one two three");
  assert.equal((await client.runs.get(id, run.run_id)).status, "success");
  const list = await client.runs.list(id);
  assert.deepEqual(list.map((r) => r.run_id), [run.run_id]);
  assert.equal(list[0].status, "success");
  assert.equal((await httpError(client.runs.get(id, newThreadId()))).status, 404);
});

test("interrupt and command.resume", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  const asked = await client.runs.wait(id, "echo", { input: say("ask: what is your name?") });
  assert.equal(asked.__interrupt__?.[0]?.value, "what is your name?", JSON.stringify(asked));
  const t = await client.threads.get(id);
  assert.equal(t.status, "interrupted");
  const state = await client.threads.getState(id);
  const interrupts = state.tasks.flatMap((task) => task.interrupts ?? []);
  assert.deepEqual(interrupts.map((i) => i.value), ["what is your name?"]);

  const values = await client.runs.wait(id, "echo", { command: { resume: "Ada" } });
  assert.equal(textOf(lastMessage(values)), "echo: what is your name? -> Ada");
  assert.equal((await client.threads.get(id)).status, "idle");
  const after = await client.threads.getState(id);
  assert.deepEqual(after.tasks.flatMap((task) => task.interrupts ?? []), []);
  // The question was answered once: the next message is a new prompt.
  const next = await client.runs.wait(id, "echo", { input: say("hello") });
  assert.equal(textOf(lastMessage(next)), "echo: hello");
});

test("command.resume with no open interrupt", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  await client.runs.wait(id, "echo", { input: say("hello") });
  if (isArtifactr) {
    // artifactr refuses it (issue 24, bad input): nothing is open to answer.
    const e = await httpError(client.runs.wait(id, "echo", { command: { resume: "nobody asked" } }));
    assert.ok(e.status >= 400 && e.status < 500, `status ${e.status}`);
    assert.equal(typeof JSON.parse(e.text).detail, "string");
  } else {
    // LangGraph's JS server accepts it and runs nothing new.
    await client.runs.wait(id, "echo", { command: { resume: "nobody asked" } });
  }
  assert.deepEqual(convo((await client.threads.getState(id)).values), [["human", "hello"], ["ai", "echo: hello"]]);
});

test("a failed run: wait rejects, the run is error, the thread goes on", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  let created;
  await assert.rejects(client.runs.wait(id, "echo", { input: say("fail: boom"), onRunCreated: (m) => (created = m) }), /boom/);
  assert.equal((await client.runs.get(id, created.run_id)).status, "error");
  const values = await client.runs.wait(id, "echo", { input: say("hello") });
  assert.equal(textOf(lastMessage(values)), "echo: hello");
});

test("getHistory, and a run from a checkpoint_id", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  await client.runs.wait(id, "echo", { input: say("hello") });
  await client.runs.wait(id, "echo", { input: say("world") });
  const state = await client.threads.getState(id);
  const history = await client.threads.getHistory(id, { limit: 50 });
  assert.ok(history.length >= 2, `history of ${history.length}`);
  // Newest first: the first entry is the current state.
  assert.equal(history[0].checkpoint.checkpoint_id, state.checkpoint.checkpoint_id);
  assert.deepEqual(convo(history[0].values), convo(state.values));
  assert.deepEqual(convo(state.values), [["human", "hello"], ["ai", "echo: hello"], ["human", "world"], ["ai", "echo: world"]]);
  // LangGraph keeps a checkpoint per graph step, artifactr one per run end:
  // both have one holding exactly the first exchange, with nothing next.
  const afterHello = history.find((h) => convo(h.values).length === 2 && textOf(lastMessage(h.values)) === "echo: hello" && h.next.length === 0);
  assert.ok(afterHello, `no checkpoint after the first run in ${JSON.stringify(history.map((h) => convo(h.values)))}`);
  const ids = history.map((h) => h.checkpoint.checkpoint_id);
  assert.equal(new Set(ids).size, ids.length, "checkpoint ids are distinct");

  // The state at that checkpoint.
  const at = await client.threads.getState(id, afterHello.checkpoint.checkpoint_id);
  assert.deepEqual(convo(at.values), [["human", "hello"], ["ai", "echo: hello"]]);

  // Time travel: a run from that checkpoint sees the history up to it only.
  let created;
  const forked = await client.runs.wait(id, "echo", {
    input: say("again"),
    checkpointId: afterHello.checkpoint.checkpoint_id,
    onRunCreated: (m) => (created = m),
  });
  assert.deepEqual(convo(forked), [["human", "hello"], ["ai", "echo: hello"], ["human", "again"], ["ai", "echo: again"]]);
  if (isArtifactr) {
    // artifactr never rewrites a thread's log: the run goes to a new thread
    // forked at the checkpoint, named by the response; the original stays.
    assert.notEqual(created.thread_id, id);
    assert.deepEqual(convo((await client.threads.getState(created.thread_id)).values), convo(forked));
    assert.deepEqual(convo((await client.threads.getState(id)).values), convo(state.values));
  } else {
    // LangGraph forks within the thread: its head is now the new branch.
    assert.equal(created.thread_id, id);
    assert.deepEqual(convo((await client.threads.getState(id)).values), convo(forked));
  }

  assert.equal((await httpError(client.threads.getHistory(newThreadId()))).status, 404);
});

test("a retried post with the same message id", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  const msgId = newThreadId();
  const input = { messages: [{ role: "user", content: "hello", id: msgId }] };
  const a = await client.runs.create(id, "echo", { input });
  await client.runs.join(id, a.run_id);
  const b = await client.runs.create(id, "echo", { input, multitaskStrategy: "enqueue" });
  if (isArtifactr) {
    // artifactr: the message id is the artifactr message id, so the retry is
    // the same post and the same run, and nothing runs twice.
    assert.equal(b.run_id, a.run_id);
    assert.deepEqual((await client.runs.list(id)).map((r) => r.run_id), [a.run_id]);
  } else {
    // LangGraph makes a second run; its messages reducer replaces the
    // message with the same id.
    assert.notEqual(b.run_id, a.run_id);
    await client.runs.join(id, b.run_id);
  }
  const humans = convo((await client.threads.getState(id)).values).filter(([t]) => t === "human");
  assert.deepEqual(humans, [["human", "hello"]]);
});

test("after_seconds delays the run; runs.delete", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  const run = await client.runs.create(id, "echo", { input: say("later"), afterSeconds: 1 });
  // Still pending just after: the run waits out its delay before any runner takes it.
  assert.equal((await client.runs.get(id, run.run_id)).status, "pending");
  const values = await client.runs.join(id, run.run_id);
  assert.equal(textOf(lastMessage(values)), "echo: later");
  if (isArtifactr) {
    // artifactr's log is append-only and a run is part of the audit: a run
    // delete is refused (405, with a detail), and nothing changes.
    const e = await httpError(client.runs.delete(id, run.run_id));
    assert.equal(e.status, 405);
    assert.equal(typeof JSON.parse(e.text).detail, "string");
    assert.equal((await client.runs.get(id, run.run_id)).status, "success");
    assert.deepEqual((await client.runs.list(id)).map((r) => r.run_id), [run.run_id]);
    assert.deepEqual(convo((await client.threads.getState(id)).values), [["human", "later"], ["ai", "echo: later"]]);
  } else {
    // LangGraph deletes the run, and its checkpoints with it.
    await client.runs.delete(id, run.run_id);
    assert.equal((await httpError(client.runs.get(id, run.run_id))).status, 404);
    assert.deepEqual(await client.runs.list(id), []);
    assert.deepEqual(convo((await client.threads.getState(id)).values), []);
  }
  assert.equal((await httpError(client.runs.delete(id, newThreadId()))).status, 404);
});

test("a run sets its thread's graph_id and assistant_id metadata", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id, metadata: { user: "ada" } });
  assert.equal((await client.threads.get(id)).metadata.graph_id, undefined);
  const assistantOf = async (graphId) => (await client.assistants.search({ graphId }))[0].assistant_id;
  await client.runs.wait(id, "echo", { input: say("hello") });
  let meta = (await client.threads.get(id)).metadata;
  assert.deepEqual([meta.graph_id, meta.assistant_id, meta.user], ["echo", await assistantOf("echo"), "ada"]);
  // The next run's assistant replaces them.
  await client.runs.wait(id, "slow", { input: say("hi") });
  meta = (await client.threads.get(id)).metadata;
  assert.deepEqual([meta.graph_id, meta.assistant_id, meta.user], ["slow", await assistantOf("slow"), "ada"]);
  // A thread a run creates has them from the start, and search finds it by them.
  const id2 = newThreadId();
  await client.runs.wait(id2, "echo", { input: say("hello"), ifNotExists: "create" });
  meta = (await client.threads.get(id2)).metadata;
  assert.deepEqual([meta.graph_id, meta.assistant_id], ["echo", await assistantOf("echo")]);
  const found = await client.threads.search({ metadata: { graph_id: "echo", assistant_id: meta.assistant_id }, limit: 1000 });
  assert.ok(found.some((t) => t.thread_id === id2));
  assert.ok(!found.some((t) => t.thread_id === id));
});
