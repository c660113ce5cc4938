// Runs examples/langgraph/quickstart.mjs as a user who ran npm install would:
// from a directory of its own, beside the suite's node_modules.
import { execFile } from "node:child_process";
import { mkdtempSync, copyFileSync, symlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { suiteDir } from "./servers.mjs";

export const quickstartPath = join(suiteDir, "..", "..", "examples", "langgraph", "quickstart.mjs");

/** Runs the quickstart against url (token: ARTIFACTR_TOKEN); resolves with its stdout. */
export async function runQuickstart(url, token = "") {
  const dir = mkdtempSync(join(tmpdir(), "h24-quickstart-"));
  try {
    copyFileSync(quickstartPath, join(dir, "quickstart.mjs"));
    symlinkSync(join(suiteDir, "node_modules"), join(dir, "node_modules"));
    const { stdout } = await promisify(execFile)(process.execPath, [join(dir, "quickstart.mjs")], {
      env: { ...process.env, ARTIFACTR_URL: url, ARTIFACTR_TOKEN: token },
      timeout: 60_000,
    });
    return stdout;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
