// Webhooks: one POST of the run when it ends, to a local receiver.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, isArtifactr } from "./lib/servers.mjs";
import { startReceiver } from "./lib/receiver.mjs";
import { newThreadId, say, waitFor, waitRunStatus } from "./lib/helpers.mjs";

let srv, client, rcv;
before(async () => {
  srv = await startServer();
  client = srv.client();
  rcv = await startReceiver();
});
after(async () => {
  await srv?.close();
  await rcv?.close();
});

// quiet waits out a window in which a duplicate delivery would show. It
// checks an absence, so it cannot wait for a condition instead.
const quiet = (ms) => new Promise((r) => setTimeout(r, ms));

test("a webhook gets one POST of the run when it ends", async () => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  const start = rcv.deliveries.length;
  const run = await client.runs.create(id, "echo", { input: say("hello"), webhook: rcv.url });
  await waitFor(() => rcv.deliveries.length > start, { what: "a webhook delivery" });
  await quiet(1000);
  const mine = rcv.deliveries.slice(start);
  assert.equal(mine.length, 1, `deliveries: ${JSON.stringify(mine)}`);
  assert.equal(mine[0].method, "POST");
  assert.equal(mine[0].body.run_id, run.run_id);
  assert.equal(mine[0].body.thread_id, id);
  assert.equal(mine[0].body.status, "success");
  assert.equal((await client.runs.get(id, run.run_id)).status, "success");
});

test("a webhook is delivered once across a serve restart", { skip: !isArtifactr && "artifactr only: LangGraph's in-memory server keeps no pending delivery across a restart" }, async (t) => {
  const id = newThreadId();
  await client.threads.create({ threadId: id });
  const start = rcv.deliveries.length;
  // Until serve restarts, the receiver refuses every delivery.
  rcv.status = 503;
  const run = await client.runs.create(id, "slow", { input: say("slow: 200"), webhook: rcv.url });
  await waitRunStatus(client, id, run.run_id, ["running"]);
  // Stop serve in the middle of the run. SIGTERM drains: the run may finish
  // within the shutdown grace (its webhook then fails, the receiver refuses
  // it) or be cancelled; either way its end is in the log.
  await srv.stop();
  rcv.status = 200;
  await srv.start();
  client = srv.client();
  const ended = await waitRunStatus(client, id, run.run_id, ["success", "error", "interrupted"]);
  await waitFor(() => rcv.accepted().some((d) => d.body?.run_id === run.run_id), { timeoutMs: 30_000, what: "the webhook delivered after the restart" });
  await quiet(1500);
  const accepted = rcv.deliveries.slice(start).filter((d) => d.status < 300);
  assert.equal(accepted.length, 1, `accepted deliveries: ${JSON.stringify(accepted)}`);
  assert.equal(accepted[0].body.run_id, run.run_id);
  assert.equal(accepted[0].body.status, ended.status);
  // And the refused attempts, if any, were for the same run.
  for (const d of rcv.deliveries.slice(start)) assert.equal(d.body?.run_id, run.run_id);
  t.diagnostic(`run ${ended.status}; attempts refused before the restart: ${rcv.deliveries.length - start - 1}`);
});
