#!/usr/bin/env node
// An exec agent (actors/agent/PROTOCOL.md) for the console's tests:
// "slow N MS" writes N outputs MS apart (3 and 200 by default), then done;
// "ask: Q" asks Q and answers "slow: Q -> ANSWER"; anything else is echoed.
import { createInterface } from "node:readline";

const send = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const it = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const first = await it.next();
if (first.done) process.exit(1);
const turn = JSON.parse(first.value);
const text = turn.prompt.text;
const m = text.match(/^slow(?:\s+(\d+))?(?:\s+(\d+))?/);
if (m) {
  const n = Number(m[1] || 3), gap = Number(m[2] || 200);
  for (let i = 1; i <= n; i++) {
    await new Promise((r) => setTimeout(r, gap));
    send({ type: "output", text: `part ${i} of ${n}` });
  }
  send({ type: "done", output: "" });
} else if (text.startsWith("ask:")) {
  const q = text.slice(4).trim();
  send({ type: "ask", question: q });
  for (;;) {
    const { value, done } = await it.next();
    if (done) process.exit(1);
    const msg = JSON.parse(value);
    if (msg.type === "answer") {
      send({ type: "done", output: `slow: ${q} -> ${msg.message.text}` });
      break;
    }
  }
} else {
  send({ type: "done", output: "slow: " + text });
}
process.exit(0);
