// The README's JavaScript snippet (examples/langgraph/quickstart.mjs) runs
// as written against the server; the README shows it as it is.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startServer, suiteDir } from "./lib/servers.mjs";
import { runQuickstart, quickstartPath } from "./lib/quickstart.mjs";

let srv;
before(async () => {
  srv = await startServer();
});
after(() => srv?.close());

test("examples/langgraph/quickstart.mjs prints the echo agent's answers", async () => {
  assert.equal(await runQuickstart(srv.url), "echo: hello\nasks: what is your name?\necho: what is your name? -> Ada\n");
});

// The README shows the file as it is, and a Python snippet that at least
// compiles (CI has no PyPI to install langgraph-sdk from).
const block = (lang) => {
  const readme = readFileSync(join(suiteDir, "..", "..", "README.md"), "utf8");
  const sec = readme.split("## From Python or JavaScript")[1].split("\n## ")[0];
  const m = new RegExp("```" + lang + "\\n([\\s\\S]*?)```").exec(sec);
  assert.ok(m, `no ${lang} block in the README's "From Python or JavaScript"`);
  return m[1];
};

test("the README's JavaScript snippet is examples/langgraph/quickstart.mjs", () => {
  assert.equal(block("js"), readFileSync(quickstartPath, "utf8"));
});

test("the README's Python snippet compiles", async () => {
  const p = execFile("python3", ["-c", "import sys; compile(sys.stdin.read(), 'quickstart.py', 'exec')"]);
  p.stdin.end(block("python"));
  assert.equal(await new Promise((res) => p.on("exit", res)), 0);
});
