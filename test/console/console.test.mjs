// End-to-end tests of the console: each drives the page in headless
// Chromium and checks what it shows. Screenshots go to the folder printed
// first (CONSOLE_SHOTS).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { serve, natsServer, proxy, api, until, page, closeBrowser, shot, shots } from "./harness.mjs";

console.log(`console screenshots: ${shots}`);

let s; // one server for the tests that need nothing special
before(async () => { s = await serve(); });
after(async () => { await s?.stop(); await closeBrowser(); });

let n = 0;
const fresh = (p) => `${p}-${process.pid}-${++n}`;

// openThread opens the thread view and waits until the timeline is live.
async function openThread(pg, url, id) {
  await pg.goto(`${url}/#/thread/${encodeURIComponent(id)}`);
  await pg.locator("#thread-id").waitFor();
  await pg.locator("#post-assistant option").first().waitFor({ state: "attached" });
}

async function post(pg, text, { strategy = "enqueue", assistant = "slow" } = {}) {
  await pg.selectOption("#post-assistant", assistant);
  await pg.selectOption("#post-strategy", strategy);
  await pg.fill("#post-text", text);
  await pg.click("#post-form button[type=submit]");
}

const outputs = (pg) => pg.locator("#timeline li.ev-run_output");

test("a post's three outputs appear one by one, then the run ends", async () => {
  const pg = await page();
  const id = fresh("outputs");
  await openThread(pg, s.url, id);
  // Record how many outputs the timeline shows after each change of it.
  await pg.evaluate(() => {
    window.seen = [];
    new MutationObserver(() => {
      const k = document.querySelectorAll("#timeline li.ev-run_output").length;
      if (window.seen.at(-1) !== k) window.seen.push(k);
    }).observe(document.getElementById("timeline"), { childList: true });
  });
  await post(pg, "slow 3 200");
  await pg.locator("#timeline li.ev-run_completed").waitFor({ timeout: 30_000 });
  assert.deepEqual(await outputs(pg).allTextContents().then((t) => t.map((x) => x.match(/part \d of 3/)?.[0])),
    ["part 1 of 3", "part 2 of 3", "part 3 of 3"]);
  const seen = await pg.evaluate(() => window.seen);
  assert.ok(seen.includes(1) && seen.includes(2) && seen.indexOf(1) < seen.indexOf(3),
    `outputs appeared as ${JSON.stringify(seen)}, not one by one`);
  assert.match(await pg.locator("#timeline li.ev-message_posted").first().textContent(), /slow 3 200/);
  assert.match(await pg.locator("#timeline li.ev-thread_claimed").first().textContent(), /fencing token #\d+/);
  await shot(pg, "thread");
  assert.deepEqual(pg.errors, []);
  await pg.context().close();
});

test("a request is answered from the page and the run ends", async () => {
  const pg = await page();
  const id = fresh("ask");
  await openThread(pg, s.url, id);
  await post(pg, "ask: what is your name?", { assistant: "echo" });
  await pg.locator("#answer-form:not([hidden])").waitFor({ timeout: 30_000 });
  assert.match(await pg.textContent("#question"), /what is your name\?/);
  await pg.fill("#answer-text", "Ada");
  await pg.click("#answer-form button[type=submit]");
  const done = pg.locator("#timeline li.ev-run_completed");
  await done.waitFor({ timeout: 30_000 });
  assert.match(await done.textContent(), /what is your name\? -> Ada/);
  await pg.locator("#timeline li.ev-answer_given").waitFor();
  await pg.context().close();
});

test("a slow run is cancelled from the page", async () => {
  const pg = await page();
  const id = fresh("cancel");
  await openThread(pg, s.url, id);
  await post(pg, "slow 100 200");
  await outputs(pg).first().waitFor({ timeout: 30_000 });
  await pg.locator("#cancel:not([hidden])").waitFor();
  await pg.click("#cancel");
  const failed = pg.locator("#timeline li.ev-run_failed");
  await failed.waitFor({ timeout: 30_000 });
  assert.match(await failed.textContent(), /cancel/);
  assert.ok(await outputs(pg).count() < 100, "the run went on to its end");
  await pg.context().close();
});

test("a fork at an event lands on the new thread with the copied history", async () => {
  const id = fresh("src");
  const first = await api(s, "POST", `/threads/${id}/runs/wait`, { assistant_id: "echo", if_not_exists: "create", input: { messages: [{ role: "user", content: "first" }] } });
  assert.ok(first);
  await api(s, "POST", `/threads/${id}/runs/wait`, { assistant_id: "echo", input: { messages: [{ role: "user", content: "second" }] } });
  const pg = await page();
  await openThread(pg, s.url, id);
  const done = pg.locator("#timeline li.ev-run_completed");
  await until("two runs in the timeline", async () => (await done.count()) === 2);
  // The strategy form shows the thread's strategy (the API's first post
  // set it: LangGraph's default multitask_strategy is reject).
  const strategy = (await api(s, "GET", `/artifactr/threads/${id}/fold`)).Strategy;
  assert.equal(strategy, "reject");
  await until("the strategy form at the thread's", async () => (await pg.inputValue("#thread-strategy")) === strategy);
  const at = Number(await done.first().getAttribute("data-seq"));
  await done.first().locator("button.as-of").click();
  await until("the state as of the first run", async () => /As of seq/.test(await pg.textContent("#as-of")));
  assert.equal(Number(await pg.inputValue("#fork-at")), at);
  const to = fresh("fork");
  await pg.fill("#fork-thread", to);
  await pg.click("#fork-form button[type=submit]");
  await until("the page on the fork", async () => (await pg.textContent("#thread-id")) === to);
  const forked = pg.locator("#timeline li.ev-thread_forked");
  await forked.waitFor({ timeout: 30_000 });
  assert.match(await forked.textContent(), new RegExp(`from ${id} @ ${at}`));
  const fold = await api(s, "GET", `/artifactr/threads/${to}/fold`);
  assert.deepEqual(fold.Messages.map((m) => m.Text), ["first"], "the fork copies the history up to the event");
  await pg.context().close();
});

test("under reject, a second post while a run is active shows busy and writes nothing", async () => {
  const pg = await page();
  const id = fresh("reject");
  await openThread(pg, s.url, id);
  await post(pg, "slow 20 200");
  await outputs(pg).first().waitFor({ timeout: 30_000 });
  const before = (await api(s, "GET", `/artifactr/threads/${id}/fold`)).Messages.length;
  await post(pg, "another", { strategy: "reject" });
  await until("the busy error", async () => /Busy/.test(await pg.textContent("#action-error")));
  const after = (await api(s, "GET", `/artifactr/threads/${id}/fold`)).Messages.length;
  assert.equal(after, before, "the refused post was written");
  await shot(pg, "busy");
  await pg.context().close();
});

test("message text is shown as text, never as HTML", async () => {
  const pg = await page();
  const id = fresh("xss");
  const evil = "<img src=x onerror=alert(1)>";
  await openThread(pg, s.url, id);
  await post(pg, evil, { assistant: "echo" });
  const posted = pg.locator("#timeline li.ev-message_posted .ev-text");
  await posted.waitFor({ timeout: 30_000 });
  assert.equal(await posted.textContent(), evil);
  await pg.locator("#timeline li.ev-run_completed").waitFor({ timeout: 30_000 });
  assert.equal(await pg.locator("#timeline img").count(), 0);
  assert.deepEqual(pg.errors, [], "a dialog or script error means the text ran");
  // The list shows the thread id as text too.
  await pg.goto(`${s.url}/#/?q=${id}`);
  await pg.locator(`#threads tr[data-thread="${id}"]`).waitFor();
  await pg.context().close();
});

test("the thread list, runners and audit pages", async () => {
  const pg = await page();
  await pg.goto(`${s.url}/#/`);
  await pg.locator("#threads tbody tr[data-thread]").first().waitFor({ timeout: 30_000 });
  assert.match(await pg.textContent("#page-info"), /of \d+/);
  await shot(pg, "threads");
  await pg.goto(`${s.url}/#/runners`);
  await pg.locator("#sessions tbody tr").first().waitFor({ timeout: 30_000 });
  assert.match(await pg.textContent("#sessions"), new RegExp(s.runner));
  assert.match(await pg.textContent("#metrics"), /artifactr_claims_total/);
  await shot(pg, "runners");
  await pg.goto(`${s.url}/#/audit`);
  await pg.check("#audit-spec");
  await pg.click("#audit-run");
  await pg.locator("#audit-verdict").waitFor({ timeout: 60_000 });
  assert.match(await pg.textContent("#audit-verdict"), /0 violations/);
  assert.match(await pg.textContent("#audit-status"), /No violations/);
  await shot(pg, "audit");
  await pg.context().close();
});

test("--auth: no token asks for one, a wrong one is refused, the right one opens", async () => {
  const a = await serve({ auth: true });
  try {
    const pg = await page();
    await pg.goto(`${a.url}/#/`);
    await pg.locator("#login[open]").waitFor({ timeout: 30_000 });
    await pg.fill("#login-token", "wrong-token");
    await pg.click("#login-form button[type=submit]");
    await until("the refusal", async () => /refused/.test(await pg.textContent("#login-error")));
    assert.equal(await pg.evaluate(() => location.href.includes("wrong-token")), false);
    await shot(pg, "login");
    await pg.fill("#login-token", a.token);
    await pg.click("#login-form button[type=submit]");
    await pg.locator("#login:not([open])").waitFor({ state: "attached" });
    await pg.locator("#page-info").waitFor();
    await until("the list", async () => /of \d+/.test(await pg.textContent("#page-info")));
    assert.equal(await pg.evaluate(() => JSON.stringify(localStorage) + JSON.stringify(sessionStorage) + document.cookie), "{}{}");
    await pg.context().close();
  } finally {
    await a.stop();
  }
});

test("a takeover: the abandoned run, and the stale write the run's compare-and-set refused", async () => {
  const nats = await natsServer();
  // a reaches NATS through a proxy that the test can hold, as a partition:
  // a keeps running, its writes wait in the network past its TTL, and land
  // after b took the thread over. a's --timeout outlasts the partition, so
  // the output append it has outstanding waits for its verdict rather than
  // giving up as "outcome unknown" after the default 5 s.
  const cut = await proxy(nats.url);
  const a = await serve({ nats: cut.url, ttl: "2s", extra: ["--timeout", "60s"] });
  let b;
  try {
    const id = fresh("takeover");
    const pg = await page();
    await openThread(pg, a.url, id);
    // a holds the thread (b starts after a's run): its agent writes an
    // output every 200 ms, so within 200 ms of the cut a has an output
    // append outstanding, and one stays outstanding until the cut heals.
    await post(pg, "slow 200 200");
    await outputs(pg).first().waitFor({ timeout: 30_000 });
    b = await serve({ nats: nats.url, ttl: "2s" });
    cut.hold();
    await until("b's takeover", async () => {
      const f = await api(b, "GET", `/artifactr/threads/${id}/fold`);
      return f.Claim.Holder.startsWith(b.runner + "/") && f.Runs.some((r) => r.Status === "abandoned");
    }, 60_000);
    cut.release();
    const take = pg.locator("#timeline li.takeover");
    await take.waitFor({ timeout: 30_000 });
    assert.match(await take.textContent(), /takeover of claim #\d+/);
    assert.match(await take.textContent(), /must abandon run-/);
    await pg.locator("#timeline li.ev-run_abandoned").waitFor({ timeout: 30_000 });
    // The output a had outstanding reaches NATS after b's run_abandoned
    // moved the run subject on: its compare-and-set refuses it, nothing is
    // written, and only a's runner knows. Its console shows it.
    const refused = pg.locator('#timeline li.refused[data-by="compare-and-set"]');
    await refused.first().waitFor({ timeout: 30_000 });
    const text = await refused.first().textContent();
    assert.match(text, /refused run_output/);
    assert.match(text, /stale write refused by the run's compare-and-set/);
    assert.match(text, new RegExp(`holder ${a.runner}/`));
    assert.match(await pg.textContent("#refusals"), /run_output by .* refused by the run's compare-and-set/);
    await shot(pg, "takeover");
    assert.deepEqual(pg.errors, []);
    await pg.context().close();
  } finally {
    cut.release();
    await b?.stop();
    await a.stop();
    await cut.close();
    await nats.stop();
  }
});

// focused describes the focused element: what it is, and how its focus
// is drawn.
const focused = (pg) => pg.evaluate(() => {
  const e = document.activeElement;
  const st = getComputedStyle(e);
  return {
    tag: e.tagName.toLowerCase(), id: e.id, cls: e.className, text: (e.textContent || "").trim().slice(0, 40),
    href: e.getAttribute("href") || "", outline: st.outlineStyle !== "none" && parseFloat(st.outlineWidth) >= 1,
  };
});

// tabTo presses key (Tab) until match(focused) holds, and returns the
// elements it went through, in order.
async function tabTo(pg, what, match, max = 200, key = "Tab") {
  const path = [];
  for (let i = 0; i < max; i++) {
    await pg.keyboard.press(key);
    const f = await focused(pg);
    path.push(f);
    if (match(f)) return path;
  }
  throw new Error(`${what}: not reached in ${max} tabs; went through ${JSON.stringify(path.map((f) => f.id || f.text))}`);
}

test("by keyboard: tab order, Enter on links and buttons, visible focus", async () => {
  const id = fresh("keys");
  await api(s, "POST", `/threads/${id}/runs/wait`, { assistant_id: "echo", if_not_exists: "create", input: { messages: [{ role: "user", content: "first" }] } });
  const pg = await page();
  await pg.goto(`${s.url}/#/`);
  await pg.locator("#threads tbody tr[data-thread]").first().waitFor({ timeout: 30_000 });
  // The header's links come first, then the list's filters and the form
  // that opens a thread; every stop draws its focus.
  const top = await tabTo(pg, "the open-a-thread field", (f) => f.id === "open-id");
  assert.deepEqual(top.map((f) => f.id || f.text), ["artifactr", "Threads", "Runners", "Audit", "f-status", "f-q", "f-meta", "f-sort", "Apply", "open-id"]);
  for (const f of top) assert.ok(f.outline, `no visible focus on ${f.id || f.text}`);
  // Enter in the field opens the thread.
  await pg.keyboard.type(id);
  await pg.keyboard.press("Enter");
  await until("the thread view", async () => (await pg.textContent("#thread-id").catch(() => "")) === id);
  await pg.locator("#timeline li.ev-run_completed").waitFor({ timeout: 30_000 });
  // Post from the keyboard: through the timeline's "as of" buttons to the
  // message, strategy, assistant and Post.
  await pg.locator("#post-assistant option").first().waitFor({ state: "attached" });
  const toPost = await tabTo(pg, "the message field", (f) => f.id === "post-text");
  assert.ok(toPost.some((f) => /as-of/.test(f.cls)), "the timeline's as-of buttons are not in the tab order");
  await pg.keyboard.type("typed, not clicked");
  const rest = await tabTo(pg, "the Post button", (f) => f.tag === "button" && f.text === "Post", 3);
  assert.deepEqual(rest.map((f) => f.id || f.text), ["post-strategy", "post-assistant", "Post"]);
  assert.ok(rest.at(-1).outline, "no visible focus on Post");
  await pg.keyboard.press("Enter");
  await until("the typed post in the timeline", async () =>
    (await pg.locator("#timeline li.ev-message_posted .ev-text").allTextContents()).includes("typed, not clicked"));
  await until("its run's end", async () => (await pg.locator("#timeline li.ev-run_completed").count()) === 2);
  // Enter on a focused "as of" button shows the thread as of its event.
  const asOf = pg.locator("#timeline li.ev-run_completed button.as-of").first();
  await asOf.focus();
  assert.ok((await focused(pg)).outline, "no visible focus on as of");
  await pg.keyboard.press("Enter");
  await until("the state as of the first run", async () => /As of seq/.test(await pg.textContent("#as-of")));
  // A navigation focuses the new view: Tab goes into it, and Shift+Tab
  // back to the header, where Enter on Runners opens that page.
  await pg.goto(`${s.url}/#/audit`);
  await pg.locator("#audit-run").waitFor();
  assert.equal((await focused(pg)).tag, "main");
  assert.equal((await tabTo(pg, "the audit's thread field", () => true, 1)).at(-1).id, "audit-thread");
  const back = await tabTo(pg, "the Runners link", (f) => f.href === "#/runners", 5, "Shift+Tab");
  assert.deepEqual(back.map((f) => f.text), ["Audit", "Runners"]);
  await pg.keyboard.press("Enter");
  await pg.locator("#sessions tbody tr").first().waitFor({ timeout: 30_000 });
  assert.equal(await pg.evaluate(() => location.hash), "#/runners");
  assert.deepEqual(pg.errors, []);
  await pg.context().close();
});

// The WCAG contrast ratio of two CSS rgb() colours.
function contrast(a, b) {
  const lum = (c) => {
    const [r, g, bl] = c.match(/\d+(\.\d+)?/g).slice(0, 3).map(Number).map((v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * bl;
  };
  const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

test("the page follows the system's light or dark mode, readable in both", async () => {
  const id = fresh("modes");
  await api(s, "POST", `/threads/${id}/runs/wait`, { assistant_id: "echo", if_not_exists: "create", input: { messages: [{ role: "user", content: "colours" }] } });
  const seen = {};
  for (const mode of ["light", "dark"]) {
    const pg = await page({ colorScheme: mode });
    await openThread(pg, s.url, id);
    await pg.locator("#timeline li.ev-run_completed").waitFor({ timeout: 30_000 });
    const c = await pg.evaluate(() => {
      const css = (sel, p) => getComputedStyle(document.querySelector(sel))[p];
      return {
        bg: css("body", "backgroundColor"), fg: css("body", "color"),
        panel: css(".panel", "backgroundColor"), muted: css(".panel .muted", "color"),
        link: css("nav a", "color"), header: css("header", "backgroundColor"),
        primary: css("#post-form button.primary", "color"), primaryBg: css("#post-form button.primary", "backgroundColor"),
        input: css("#post-text", "color"), inputBg: css("#post-text", "backgroundColor"),
        scheme: css(":root", "colorScheme"),
      };
    });
    seen[mode] = c;
    for (const [what, fg, bg] of [["text", c.fg, c.bg], ["muted text", c.muted, c.panel], ["links", c.link, c.header],
      ["the primary button", c.primary, c.primaryBg], ["fields", c.input, c.inputBg]]) {
      const r = contrast(fg, bg);
      assert.ok(r >= 4.5, `${mode}: ${what} ${fg} on ${bg} has contrast ${r.toFixed(2)}, under 4.5`);
    }
    await shot(pg, "thread-" + mode);
    await pg.context().close();
  }
  const dark = (c) => contrast(c, "rgb(0, 0, 0)") < 2;
  assert.ok(!dark(seen.light.bg) && dark(seen.dark.bg), `background light ${seen.light.bg}, dark ${seen.dark.bg}`);
  assert.notEqual(seen.light.fg, seen.dark.fg);
  assert.notEqual(seen.light.panel, seen.dark.panel);
});

test("10,000 threads: the list's first page (figure printed, not asserted)", async () => {
  const big = await serve();
  try {
    const N = Number(process.env.CONSOLE_THREADS || 10000);
    const t0 = Date.now();
    for (let i = 0; i < N; i += 200) {
      await Promise.all(Array.from({ length: Math.min(200, N - i) }, (_, j) =>
        api(big, "POST", "/threads", { thread_id: `big-${i + j}`, metadata: { batch: String(Math.floor((i + j) / 1000)) } })));
    }
    const made = Date.now() - t0;
    await until("every thread in the list", async () => (await api(big, "GET", "/artifactr/threads?limit=1")).total === N, 120_000);
    const pg = await page();
    const t1 = Date.now();
    await pg.goto(`${big.url}/#/`);
    await pg.locator("#threads tbody tr[data-thread]").nth(49).waitFor({ timeout: 60_000 });
    const firstPage = Date.now() - t1;
    assert.match(await pg.textContent("#page-info"), new RegExp(`1–50 of ${N}`));
    await pg.click("#next");
    await until("page 2", async () => /51–100/.test(await pg.textContent("#page-info")));
    console.log(`console: ${N} threads made in ${made} ms; first page of the list shown in ${firstPage} ms`);
    await pg.context().close();
  } finally {
    await big.stop();
  }
});
