// The README's JavaScript snippet (examples/langgraph/quickstart.mjs) runs
// as written against the server.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, copyFileSync, symlinkSync, rmSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { startServer, suiteDir } from "./lib/servers.mjs";

let srv, dir;
before(async () => {
  srv = await startServer();
  // Run the example from a directory of its own, beside the suite's
  // node_modules, as a user who ran npm install would.
  dir = mkdtempSync(join(tmpdir(), "h24-quickstart-"));
  copyFileSync(join(suiteDir, "..", "..", "examples", "langgraph", "quickstart.mjs"), join(dir, "quickstart.mjs"));
  symlinkSync(join(suiteDir, "node_modules"), join(dir, "node_modules"));
});
after(async () => {
  await srv?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("examples/langgraph/quickstart.mjs prints the echo agent's answers", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [join(dir, "quickstart.mjs")], {
    env: { ...process.env, ARTIFACTR_URL: srv.url, ARTIFACTR_TOKEN: "" },
    timeout: 60_000,
  });
  assert.equal(stdout, "echo: hello\nasks: what is your name?\necho: what is your name? -> Ada\n");
});

// The README shows the file as it is, and a Python snippet that at least
// compiles (CI has no PyPI to install langgraph-sdk from).
const readme = () => readFileSync(join(suiteDir, "..", "..", "README.md"), "utf8");
const block = (lang) => {
  const sec = readme().split("## From Python or JavaScript")[1].split("\n## ")[0];
  const m = new RegExp("```" + lang + "\\n([\\s\\S]*?)```").exec(sec);
  assert.ok(m, `no ${lang} block in the README's "From Python or JavaScript"`);
  return m[1];
};

test("the README's JavaScript snippet is examples/langgraph/quickstart.mjs", () => {
  assert.equal(block("js"), readFileSync(join(suiteDir, "..", "..", "examples", "langgraph", "quickstart.mjs"), "utf8"));
});

test("the README's Python snippet compiles", async () => {
  const src = block("python");
  const p = execFile("python3", ["-c", "import sys; compile(sys.stdin.read(), 'quickstart.py', 'exec')"]);
  p.stdin.end(src);
  const code = await new Promise((res) => p.on("exit", res));
  assert.equal(code, 0);
});
