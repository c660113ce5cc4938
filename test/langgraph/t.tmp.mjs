import { startServer } from "./lib/servers.mjs";
import { randomUUID } from "node:crypto";
for (let round = 0; round < 6; round++) {
  const srv = await startServer();
  const t0 = performance.now();
  const c = srv.client();
  const misses = [];
  await Promise.all([0, 1, 2, 3].map(async (w) => {
    for (let i = 0; i < 10; i++) {
      const tag = randomUUID(), id = randomUUID();
      await c.threads.create({ threadId: id, metadata: { tag } });
      const s1 = await c.threads.search({ metadata: { tag } });
      if (s1.length !== 1) {
        const later = await c.threads.search({ metadata: { tag } });
        misses.push({ at: Math.round(performance.now() - t0), w, i, laterFound: later.length });
      }
      await c.runs.wait(id, "echo", { input: { messages: [{ role: "user", content: "hello" }] } });
    }
  }));
  console.log(`round ${round}: misses ${JSON.stringify(misses)}`);
  await srv.close();
}
