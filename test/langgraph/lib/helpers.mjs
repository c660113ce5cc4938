// Small helpers shared by the suite's test files.
import { randomUUID } from "node:crypto";
import assert from "node:assert/strict";

/** A fresh thread id: a UUID, the one form both servers take. */
export const newThreadId = () => randomUUID();

/** An input that posts one user message. */
export const say = (text) => ({ messages: [{ role: "user", content: text }] });

/** The text of a LangGraph message object (string or content parts). */
export function textOf(m) {
  if (m == null) return undefined;
  const c = m.content ?? m.text;
  if (typeof c === "string") return c;
  if (Array.isArray(c)) return c.map((p) => (typeof p === "string" ? p : p.text ?? "")).join("");
  return c;
}

/** [type, text] of each message, for comparing conversations. */
export const convo = (values) => (values?.messages ?? []).map((m) => [m.type, textOf(m)]);

/** The last message of values.messages. */
export const lastMessage = (values) => values?.messages?.at(-1);

/**
 * Polls fn until it returns a truthy value or the deadline passes; never a
 * fixed sleep. Returns fn's value.
 */
export async function waitFor(fn, { timeoutMs = 15_000, intervalMs = 25, what = "condition" } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Resolves with the HTTP error a call rejects with; fails if it succeeds. */
export async function httpError(promise) {
  try {
    const v = await promise;
    assert.fail(`expected an HTTP error, got ${JSON.stringify(v)?.slice(0, 300)}`);
  } catch (e) {
    if (e?.status == null) throw e;
    return e;
  }
}

/** Waits until run R of thread T has status in want (a list). */
export const waitRunStatus = (client, threadId, runId, want) =>
  waitFor(
    async () => {
      const run = await client.runs.get(threadId, runId);
      return want.includes(run.status) && run;
    },
    { what: `run ${runId} status in ${want}` },
  );

/** Every part of an SDK stream, each with the time it arrived (ms). */
export async function collect(gen, onPart) {
  const parts = [];
  for await (const p of gen) {
    parts.push({ ...p, at: performance.now() });
    if (onPart && (await onPart(p, parts)) === false) break;
  }
  return parts;
}

/** The token texts of the messages-tuple parts of a stream. */
export const tokens = (parts) =>
  parts.filter((p) => p.event === "messages" || p.event?.startsWith("messages|")).map((p) => textOf(p.data[0]));

/** The run statuses the API may report. */
export const RUN_STATUSES = ["pending", "running", "success", "error", "timeout", "interrupted"];

// SSE ids: LangGraph's are counters ("7"), artifactr's "SEQ-K" (the log
// sequence, then the index among the SSE events of that log event). Both
// order as tuples of numbers; null when an id is neither.
const idKey = (id) => (/^\d+(-\d+)*$/.test(id) ? id.split("-").map(BigInt) : null);
function cmpKey(a, b) {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i] ?? -1n;
    const y = b[i] ?? -1n;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

/** Asserts that SSE ids strictly increase (in the servers' id orders). */
export function assertIdsIncrease(ids, what = "SSE ids") {
  const keys = ids.map(idKey);
  assert.ok(keys.every(Boolean), `${what}: not counters or SEQ-K: ${ids}`);
  for (let i = 1; i < keys.length; i++) assert.equal(cmpKey(keys[i - 1], keys[i]), -1, `${what} do not increase: ${ids}`);
}
