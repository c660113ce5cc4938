// runs.stream in each stream mode; tokens arrive while the run is running.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, isArtifactr } from "./lib/servers.mjs";
import { newThreadId, say, convo, textOf, lastMessage, collect, tokens, assertIdsIncrease } from "./lib/helpers.mjs";

let srv, client;
before(async () => {
  srv = await startServer();
  client = srv.client();
});
after(() => srv?.close());

// The slow agent's chunks, 250 ms apart here: after the first token arrives
// the run has 500 ms left, ample for one status read on loopback.
const PROMPT = "slow: 250";
const CHUNKS = ["one ", "two ", "three"];

// streamSlow streams one slow run in mode and, at the first part for which
// isToken holds, reads the run's status while the stream is still open.
async function streamSlow(mode, isToken) {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  let runId;
  let statusAtFirstToken;
  const parts = await collect(
    client.runs.stream(id, "slow", { input: say(PROMPT), streamMode: mode, onRunCreated: (m) => (runId = m.run_id) }),
    async (p) => {
      if (statusAtFirstToken == null && isToken(p)) statusAtFirstToken = (await client.runs.get(id, runId)).status;
    },
  );
  return { id, runId, parts, statusAtFirstToken };
}

function checkFraming(parts, runId) {
  assert.equal(parts[0].event, "metadata", `first event ${parts[0].event}`);
  // issue 24: artifactr ends every stream with an end event. LangGraph's JS
  // server sends none: its streams just close.
  if (isArtifactr) assert.equal(parts.at(-1).event, "end", `last event ${parts.at(-1).event}`);
  else assert.ok(!parts.some((p) => p.event === "end"));
  assert.equal(parts[0].data.run_id, runId);
  // Every event carries an id, and the ids increase.
  const ids = parts.map((p) => p.id);
  assert.ok(ids.every((i) => typeof i === "string" && i !== ""), `ids ${ids}`);
  assert.equal(new Set(ids).size, ids.length, `ids repeat: ${ids}`);
  assertIdsIncrease(ids);
  assert.ok(!parts.some((p) => p.event === "error"), JSON.stringify(parts.find((p) => p.event === "error")));
}

test("stream mode messages-tuple: the three tokens, each while the run runs", async () => {
  const { id, runId, parts, statusAtFirstToken } = await streamSlow("messages-tuple", (p) => p.event === "messages");
  checkFraming(parts, runId);
  assert.deepEqual(tokens(parts), CHUNKS);
  const msgs = parts.filter((p) => p.event === "messages");
  for (const p of msgs) {
    const [chunk, meta] = p.data;
    assert.equal(chunk.type.startsWith("ai") ? "ai" : chunk.type, "ai", JSON.stringify(chunk));
    assert.equal(typeof meta, "object");
  }
  // One message: every chunk has the same id.
  assert.equal(new Set(msgs.map((p) => p.data[0].id)).size, 1);
  assert.ok(["pending", "running"].includes(statusAtFirstToken), `run status at the first token: ${statusAtFirstToken}`);
  assert.equal((await client.runs.get(id, runId)).status, "success");
  assert.equal(textOf(lastMessage((await client.threads.getState(id)).values)), "one two three");
});

test("stream mode values: the state after each step, the reply last", async () => {
  // The first values event (the input taken) comes while the run runs.
  const { runId, parts, statusAtFirstToken } = await streamSlow("values", (p) => p.event === "values");
  assert.ok(["pending", "running"].includes(statusAtFirstToken), `run status at the first values event: ${statusAtFirstToken}`);
  checkFraming(parts, runId);
  const values = parts.filter((p) => p.event === "values");
  assert.ok(values.length >= 1);
  assert.deepEqual(convo(values.at(-1).data), [["human", PROMPT], ["ai", "one two three"]]);
  // Every values event is a whole state: it starts with the prompt.
  for (const v of values) assert.deepEqual(convo(v.data)[0], ["human", PROMPT]);
});

test("stream mode updates: a node's update holds the reply", async () => {
  const { runId, parts } = await streamSlow("updates", () => false);
  checkFraming(parts, runId);
  const updates = parts.filter((p) => p.event === "updates");
  assert.ok(updates.length >= 1);
  const replies = updates.flatMap((u) => Object.values(u.data).flatMap((node) => node?.messages ?? []));
  assert.deepEqual(replies.filter((m) => m.type === "ai").map(textOf), ["one two three"]);
});

test("stream mode events: on_chat_model_stream tokens while the run runs", async () => {
  const isTok = (p) => p.event === "events" && p.data.event === "on_chat_model_stream";
  const { id, runId, parts, statusAtFirstToken } = await streamSlow("events", isTok);
  checkFraming(parts, runId);
  const evs = parts.filter((p) => p.event === "events");
  for (const e of evs) assert.equal(typeof e.data.event, "string");
  assert.deepEqual(parts.filter(isTok).map((p) => textOf(p.data.data.chunk)), CHUNKS);
  assert.ok(["pending", "running"].includes(statusAtFirstToken), `run status at the first token: ${statusAtFirstToken}`);
  assert.equal((await client.runs.get(id, runId)).status, "success");
});

test("several stream modes at once", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  let runId;
  const parts = await collect(
    client.runs.stream(id, "slow", { input: say("go"), streamMode: ["values", "updates", "messages-tuple"], onRunCreated: (m) => (runId = m.run_id) }),
  );
  checkFraming(parts, runId);
  const kinds = new Set(parts.map((p) => p.event));
  for (const k of ["metadata", "values", "updates", "messages"]) assert.ok(kinds.has(k), `no ${k} event in ${[...kinds]}`);
  assert.deepEqual(tokens(parts), CHUNKS);
  assert.deepEqual(convo(parts.filter((p) => p.event === "values").at(-1).data).at(-1), ["ai", "one two three"]);
});

test("a failing run streams an error event", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  const parts = await collect(client.runs.stream(id, "echo", { input: say("fail: boom"), streamMode: "values" }));
  const err = parts.find((p) => p.event === "error");
  assert.ok(err, `no error event in ${parts.map((p) => p.event)}`);
  assert.match(JSON.stringify(err.data), /boom/);
});

test("stateless run: runs.stream with no thread", async () => {
  const parts = await collect(client.runs.stream(null, "echo", { input: say("hello"), streamMode: "values" }));
  assert.equal(parts[0].event, "metadata");
  assert.deepEqual(convo(parts.filter((p) => p.event === "values").at(-1).data).at(-1), ["ai", "echo: hello"]);
  const values = await client.runs.wait(null, "echo", { input: say("hi") });
  assert.equal(textOf(lastMessage(values)), "echo: hi");
});
