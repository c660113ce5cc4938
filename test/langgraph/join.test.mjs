// joinStream after a cut connection, with Last-Event-ID: no gap, no duplicate.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer } from "./lib/servers.mjs";
import { newThreadId, say, convo, collect, tokens, waitRunStatus, assertIdsIncrease } from "./lib/helpers.mjs";

let srv, client;
before(async () => {
  srv = await startServer();
  client = srv.client();
});
after(() => srv?.close());

const MODES = ["values", "messages-tuple"];
const CHUNKS = ["one ", "two ", "three"];

// cutAfterFirstToken streams a slow run and cuts the connection (aborts the
// fetch) as soon as the first token has arrived. The run goes on.
async function cutAfterFirstToken(id) {
  const ac = new AbortController();
  let runId;
  const before = [];
  try {
    for await (const p of client.runs.stream(id, "slow", {
      input: say("slow: 300"),
      streamMode: MODES,
      // LangGraph's server replays only runs made resumable; artifactr's
      // streams always are (they are read from the log).
      streamResumable: true,
      onDisconnect: "continue",
      signal: ac.signal,
      onRunCreated: (m) => (runId = m.run_id),
    })) {
      before.push(p);
      if (p.event === "messages") {
        ac.abort();
        break;
      }
    }
  } catch (e) {
    if (e.name !== "AbortError") throw e;
  }
  return { runId, before };
}

async function checkRest(id, runId, before, { afterEnd }) {
  assert.deepEqual(tokens(before), ["one "]);
  const cutId = before.at(-1).id;
  assert.ok(cutId, "the token event has an id");
  if (afterEnd) {
    // Rejoin only once the run has ended: then the rest can only come from
    // replay, not from live events.
    assert.equal((await waitRunStatus(client, id, runId, ["success", "error", "interrupted"])).status, "success");
  }
  const rest = await collect(client.runs.joinStream(id, runId, { lastEventId: cutId, streamMode: MODES }));
  // No duplicate, no gap: the tokens before the cut and after it are the
  // three, once each, in order.
  assert.deepEqual([...tokens(before), ...tokens(rest)], CHUNKS, `events after ${cutId}: ${JSON.stringify(rest.map((p) => [p.id, p.event]))}`);
  const ids = rest.map((p) => p.id).filter(Boolean);
  assert.ok(!ids.includes(cutId), "the event at Last-Event-ID is not sent again");
  assert.ok(!before.some((p) => ids.includes(p.id)), "no event sent twice");
  assertIdsIncrease([cutId, ...ids], `ids from the cut (${cutId}) on`);
  const lastValues = rest.filter((p) => p.event === "values").at(-1);
  assert.deepEqual(convo(lastValues.data).at(-1), ["ai", "one two three"]);
  // The cut did not cancel the run (on_disconnect continue).
  assert.equal((await waitRunStatus(client, id, runId, ["success", "error", "interrupted"])).status, "success");
}

test("joinStream with Last-Event-ID at once after a cut connection gets exactly the rest", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  const { runId, before } = await cutAfterFirstToken(id);
  await checkRest(id, runId, before, { afterEnd: false });
});

test("joinStream with Last-Event-ID after the run ended replays exactly the rest", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  const { runId, before } = await cutAfterFirstToken(id);
  await checkRest(id, runId, before, { afterEnd: true });
});

test("joinStream of a running background run streams its tokens", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  const run = await client.runs.create(id, "slow", { input: say("slow: 300"), streamMode: MODES, streamResumable: true });
  const parts = await collect(client.runs.joinStream(id, run.run_id, { streamMode: MODES }));
  // Joined while it runs: at least the tokens still to come, in order.
  const got = tokens(parts);
  assert.deepEqual(got, CHUNKS.slice(CHUNKS.length - got.length));
  assert.ok(got.length >= 1, `no token in ${parts.map((p) => p.event)}`);
  assert.equal((await client.runs.get(id, run.run_id)).status, "success");
});

test("on_disconnect cancel: cutting the stream cancels the run", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  const ac = new AbortController();
  let runId;
  try {
    for await (const p of client.runs.stream(id, "slow", {
      input: say("slow: 3000"), // 6 s active: the cut must reach the server first, on a loaded machine too
      streamMode: "messages-tuple",
      onDisconnect: "cancel",
      signal: ac.signal,
      onRunCreated: (m) => (runId = m.run_id),
    })) {
      if (p.event === "messages") {
        ac.abort();
        break;
      }
    }
  } catch (e) {
    if (e.name !== "AbortError") throw e;
  }
  const run = await waitRunStatus(client, id, runId, ["success", "error", "interrupted"]);
  assert.equal(run.status, "interrupted");
  const values = (await client.threads.getState(id)).values;
  assert.ok(!convo(values).some(([, s]) => s === "one two three"), "the run did not finish");
});
