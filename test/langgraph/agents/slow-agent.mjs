#!/usr/bin/env node
// An artifactr exec agent (actors/agent/PROTOCOL.md): three outputs
// slowPlan's gap apart, then done with the three joined.
import { createInterface } from "node:readline";
import { slowPlan } from "./slow-plan.mjs";

const send = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const lines = createInterface({ input: process.stdin });
const it = lines[Symbol.asyncIterator]();
const first = await it.next();
if (first.done) process.exit(1);
const turn = JSON.parse(first.value);
if (turn.type !== "turn") {
  send({ type: "error", reason: "expected a turn line" });
  process.exit(1);
}
// artifactr closes stdin on cancel: stop then.
lines.on("close", () => process.exit(0));
const { chunks, gapMs } = slowPlan(turn.prompt.text);
for (const [i, chunk] of chunks.entries()) {
  if (i > 0) await new Promise((r) => setTimeout(r, gapMs));
  send({ type: "output", text: chunk });
}
send({ type: "done", output: chunks.join("") });
