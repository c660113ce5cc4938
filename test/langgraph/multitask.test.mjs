// The four multitask (double-texting) strategies, and cancel with interrupt
// and with rollback. The first run is the slow agent with long gaps, kept
// active until the test has seen it running.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, isArtifactr } from "./lib/servers.mjs";
import { newThreadId, say, convo, textOf, lastMessage, httpError, waitRunStatus, waitFor } from "./lib/helpers.mjs";

let srv, client;
before(async () => {
  srv = await startServer();
  client = srv.client();
});
after(() => srv?.close());

const LONG = "slow: 2000"; // three chunks 2 s apart: 4 s active at least, on a loaded machine too

// startSlow starts a slow run and waits until it is running.
async function startSlow(prompt = LONG) {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  const first = await client.runs.create(id, "slow", { input: say(prompt) });
  await waitRunStatus(client, id, first.run_id, ["running"]);
  await waitFor(async () => (await client.threads.get(id)).status === "busy", { what: "thread busy" });
  return { id, first };
}

const humans = (values) => convo(values).filter(([t]) => t === "human").map(([, s]) => s);

test("multitask reject: refused while a run is active, nothing written", async () => {
  const { id, first } = await startSlow();
  const e = await httpError(client.runs.create(id, "echo", { input: say("second"), multitaskStrategy: "reject" }));
  // issue 24: artifactr answers 409 Conflict. LangGraph's JS server answers 422.
  if (isArtifactr) assert.equal(e.status, 409);
  else assert.ok([409, 422].includes(e.status), `status ${e.status}`);
  const values = await client.runs.join(id, first.run_id);
  assert.deepEqual(convo(values), [["human", LONG], ["ai", "one two three"]]);
  assert.equal((await client.runs.get(id, first.run_id)).status, "success");
  assert.deepEqual((await client.runs.list(id)).map((r) => r.run_id), [first.run_id]);
});

test("multitask enqueue: the second run waits, then runs", async () => {
  const { id, first } = await startSlow();
  const second = await client.runs.create(id, "echo", { input: say("second"), multitaskStrategy: "enqueue" });
  assert.equal(second.status, "pending");
  const values = await client.runs.join(id, second.run_id);
  assert.deepEqual(convo(values), [["human", LONG], ["ai", "one two three"], ["human", "second"], ["ai", "echo: second"]]);
  assert.equal((await client.runs.get(id, first.run_id)).status, "success");
  assert.equal((await client.runs.get(id, second.run_id)).status, "success");
});

test("multitask interrupt: the first run stops, its prompt stays, the second runs", async () => {
  const { id, first } = await startSlow();
  const second = await client.runs.create(id, "echo", { input: say("second"), multitaskStrategy: "interrupt" });
  const values = await client.runs.join(id, second.run_id);
  assert.equal(textOf(lastMessage(values)), "echo: second");
  // The interrupted run's prompt is still in the history. (Whether its partial
  // output shows differs: artifactr keeps what the run wrote, LangGraph drops
  // the unfinished step; not checked.)
  assert.deepEqual(humans(values), [LONG, "second"]);
  assert.ok(!convo(values).some(([, s]) => s === "one two three"), "the interrupted run did not finish");
  assert.equal((await client.runs.get(id, first.run_id)).status, "interrupted");
  assert.equal((await client.runs.get(id, second.run_id)).status, "success");
});

test("multitask rollback: the first run stops and is left out of the history", async () => {
  const { id, first } = await startSlow();
  const second = await client.runs.create(id, "echo", { input: say("second"), multitaskStrategy: "rollback" });
  const values = await client.runs.join(id, second.run_id);
  assert.equal(textOf(lastMessage(values)), "echo: second");
  assert.equal((await client.runs.get(id, second.run_id)).status, "success");
  if (isArtifactr) {
    assert.deepEqual(convo(values), [["human", "second"], ["ai", "echo: second"]]);
    assert.deepEqual(convo((await client.threads.getState(id)).values), convo(values));
    // artifactr never deletes from its log: the rolled-back run is still
    // there, interrupted, for the audit.
    assert.equal((await client.runs.get(id, first.run_id)).status, "interrupted");
  } else {
    // LangGraph's in-memory JS server does not roll back a running run: it
    // aborts it (status "error") and keeps its prompt in the state.
    assert.deepEqual(humans(values), [LONG, "second"]);
    assert.equal((await client.runs.get(id, first.run_id)).status, "error");
  }
});

test("cancel with interrupt: the run ends interrupted, its prompt stays", async () => {
  const { id, first } = await startSlow();
  await client.runs.cancel(id, first.run_id, true, "interrupt");
  // wait=true: the run has ended when cancel returns.
  const run = await client.runs.get(id, first.run_id);
  assert.equal(run.status, "interrupted");
  await waitFor(async () => (await client.threads.get(id)).status === "idle", { what: "thread idle" });
  assert.deepEqual(humans((await client.threads.getState(id)).values), [LONG]);
  const values = await client.runs.wait(id, "echo", { input: say("next") });
  assert.deepEqual(humans(values), [LONG, "next"]);
  assert.equal(textOf(lastMessage(values)), "echo: next");
});

test("cancel with rollback: the run is left out of the history", async () => {
  const { id, first } = await startSlow();
  await client.runs.cancel(id, first.run_id, true, "rollback");
  // The thread is idle after it on artifactr; LangGraph's JS server marks it
  // "error", as the aborted run failed.
  const want = isArtifactr ? ["idle"] : ["idle", "error"];
  await waitFor(async () => want.includes((await client.threads.get(id)).status), { what: `thread ${want}` });
  const values = await client.runs.wait(id, "echo", { input: say("next") });
  if (isArtifactr) {
    assert.equal((await client.runs.get(id, first.run_id)).status, "interrupted"); // kept in the log
    assert.deepEqual(convo(values), [["human", "next"], ["ai", "echo: next"]]);
  } else {
    // LangGraph's in-memory JS server only aborts the run (status "error")
    // and keeps its prompt: no rollback.
    assert.equal((await client.runs.get(id, first.run_id)).status, "error");
    assert.deepEqual(humans(values), [LONG, "next"]);
  }
  assert.equal(textOf(lastMessage(values)), "echo: next");
});

test("cancel without wait, then the run ends interrupted", async () => {
  const { id, first } = await startSlow();
  await client.runs.cancel(id, first.run_id, false, "interrupt");
  await waitRunStatus(client, id, first.run_id, ["interrupted"]);
  assert.equal((await httpError(client.runs.cancel(id, newThreadId()))).status, 404);
});
