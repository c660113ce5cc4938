// The console in Firefox: Debian's firefox-esr, headless, driven over
// WebDriver BiDi (harness.mjs, firefoxPage). One launch, in dark mode, and
// each page checked for what it shows: the thread list, a thread's
// timeline with a post made from the page, the runners and the audit.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { serve, api, until, firefoxPage, closeBrowser, shot } from "./harness.mjs";

let s;
before(async () => { s = await serve(); });
after(async () => { await s?.stop(); await closeBrowser(); });

test("Firefox: the list, a thread with a post from the page, runners and audit", async () => {
  const id = `firefox-${process.pid}`;
  const evil = "<img src=x onerror=alert(1)>";
  await api(s, "POST", `/threads/${id}/runs/wait`, { assistant_id: "echo", if_not_exists: "create", input: { messages: [{ role: "user", content: evil }] } });
  const pg = await firefoxPage({ dark: true });
  console.log(`firefox ${pg.context().browser().version()}`);

  await pg.goto(`${s.url}/#/?q=${id}`);
  const row = pg.locator(`#threads tr[data-thread="${id}"]`);
  await row.waitFor({ timeout: 30_000 });
  assert.match(await row.textContent(), /idle/);
  assert.match(await pg.textContent("#page-info"), /1–1 of 1/);
  // The system's dark mode (set in the browser, not emulated) darkens it.
  const bg = await pg.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(bg, "rgb(21, 21, 21)", "the page does not follow Firefox's dark mode");
  await shot(pg, "firefox-threads");

  // Into the thread by its link; the post's text is text, not HTML.
  await row.locator("a").click();
  await until("the thread view", async () => (await pg.textContent("#thread-id").catch(() => "")) === id);
  const done = pg.locator("#timeline li.ev-run_completed");
  await done.first().waitFor({ timeout: 30_000 });
  assert.equal(await pg.locator("#timeline li.ev-message_posted .ev-text").first().textContent(), evil);
  assert.equal(await pg.locator("#timeline img").count(), 0);
  assert.match(await pg.locator("#timeline li.ev-thread_claimed").first().textContent(), /fencing token #\d+/);
  // A post from the page: its run's outputs stream in over SSE.
  await pg.locator("#post-assistant option").first().waitFor({ state: "attached" });
  await pg.selectOption("#post-assistant", "slow");
  await pg.fill("#post-text", "slow 3 100");
  await pg.click("#post-form button[type=submit]");
  await until("the run's three outputs", async () => (await pg.locator("#timeline li.ev-run_output").allTextContents())
    .filter((t) => /part \d of 3/.test(t)).length === 3, 60_000).catch(async (e) => {
    // Say what the page and the log show, to tell a lost post from a stuck stream.
    const runs = (await api(s, "GET", `/artifactr/threads/${id}/fold`)).Runs.map((r) => [r.Status, r.Outputs]);
    throw new Error(`${e.message}; the page says "${await pg.textContent("#action-status")}" "${await pg.textContent("#action-error")}" ` +
      `"${await pg.textContent("#conn")}"; it shows ${await pg.locator("#timeline li").count()} events; the log's runs: ${JSON.stringify(runs)}`);
  });
  await until("its end", async () => (await done.count()) === 2, 60_000);
  await shot(pg, "firefox-thread");

  await pg.click('nav a[data-nav="runners"]');
  await pg.locator("#sessions tbody tr").first().waitFor({ timeout: 30_000 });
  assert.match(await pg.textContent("#sessions"), new RegExp(s.runner));
  await pg.click('nav a[data-nav="audit"]');
  await pg.fill("#audit-thread", id);
  await pg.click("#audit-run");
  await pg.locator("#audit-verdict").waitFor({ timeout: 60_000 });
  assert.match(await pg.textContent("#audit-verdict"), /of 1 threads: 0 violations/);
  await shot(pg, "firefox-audit");
  // A screenshot makes playwright add a <style> element to the page, which
  // the page's CSP refuses (and Firefox reports): the CSP at work, not an
  // error of the page.
  assert.deepEqual(pg.errors.filter((e) => !/blocked an inline style \(style-src-elem\)/.test(e)), []);
  await pg.context().close();
});
