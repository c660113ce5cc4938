// The README's JavaScript snippet (examples/langgraph/quickstart.mjs) runs
// as written against the server.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, copyFileSync, symlinkSync, rmSync } from "node:fs";
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
