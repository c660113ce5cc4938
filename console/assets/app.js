// artifactr console: one ES module, no build step, no third-party code.
// Every text from the server is put in the page as text (textContent),
// never as HTML. The token, when the server needs one, lives in this
// module's memory only: never in storage, never in a URL.

let token = "";
const main = document.getElementById("main");
const conn = document.getElementById("conn");
let viewAbort = new AbortController(); // ends the current view's streams

// el builds an element: attrs are properties or attributes ("on*" are
// listeners), children are nodes or strings (as text).
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else if (k === "dataset") Object.assign(e.dataset, v);
    else if (k in e && typeof v !== "string") e[k] = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function short(s, n = 40) {
  s = String(s ?? "");
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

function when(t) {
  if (!t || t.startsWith("0001-")) return "—";
  const d = new Date(t);
  return d.toLocaleString(undefined, { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

// ApiError carries the HTTP status and the server's detail.
class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

// explain says an error in words a person can act on.
function explain(err) {
  const d = err.message || String(err);
  switch (err.status) {
    case 401: return "Not signed in: the server needs a token. " + d;
    case 403: return "Not allowed: this token may only read. " + d;
    case 404: return "Not found: " + d;
    case 409: return "Busy or conflict: " + d + " (nothing was written)";
    case 413: return "Too large: " + d;
    case 422: return "Refused: " + d;
    case 503: return "Unavailable: " + d;
    case 507: return "Not written: the server is out of storage. " + d;
  }
  return d;
}

function headers(extra = {}) {
  const h = { ...extra };
  if (token) h.Authorization = "Bearer " + token;
  return h;
}

// api calls the server and returns its JSON; a 401 asks for a token and
// tries once more.
async function api(method, path, body, retried = false) {
  const opts = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) opts.body = JSON.stringify(body);
  const res = await fetch(path, opts);
  if (res.status === 401 && !retried) {
    await askToken(await detailOf(res));
    return api(method, path, body, true);
  }
  if (!res.ok) throw new ApiError(res.status, await detailOf(res));
  if (res.status === 204) return null;
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

async function detailOf(res) {
  try {
    const j = await res.json();
    return typeof j.detail === "string" ? j.detail : JSON.stringify(j.detail ?? j);
  } catch {
    return res.status + " " + res.statusText;
  }
}

let tokenWaiters = null;
function askToken(why) {
  const dlg = document.getElementById("login");
  document.getElementById("login-error").textContent = token ? "That token was refused: " + why : "";
  if (!tokenWaiters) {
    tokenWaiters = [];
    dlg.showModal();
    document.getElementById("login-token").focus();
  }
  return new Promise((resolve) => tokenWaiters.push(resolve));
}

document.getElementById("login-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const input = document.getElementById("login-token");
  const candidate = input.value.trim();
  const res = await fetch("/artifactr/runners", { headers: { Authorization: "Bearer " + candidate } });
  if (res.status === 401) {
    document.getElementById("login-error").textContent = "That token was refused: " + (await detailOf(res));
    input.select();
    return;
  }
  token = candidate;
  input.value = "";
  document.getElementById("login").close();
  const ws = tokenWaiters || [];
  tokenWaiters = null;
  ws.forEach((r) => r());
});

// sse follows a Server-Sent Events route with fetch (EventSource cannot
// send the token), calling on(name, data, id) per event. It reconnects
// after a drop with Last-Event-ID, until signal aborts.
async function sse(path, on, signal, { method = "GET", body, lastId = "", reconnect = true } = {}) {
  for (let backoff = 250; !signal.aborted; backoff = Math.min(backoff * 2, 5000)) {
    try {
      const h = headers(body === undefined ? { Accept: "text/event-stream" } : { Accept: "text/event-stream", "Content-Type": "application/json" });
      if (lastId) h["Last-Event-ID"] = lastId;
      const res = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), signal });
      if (res.status === 401) {
        await askToken(await detailOf(res));
        continue;
      }
      if (!res.ok) throw new ApiError(res.status, await detailOf(res));
      conn.textContent = "";
      backoff = 250;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let name = "message", data = "", id = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("event: ")) name = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
            else if (line.startsWith("id: ")) id = line.slice(4);
          }
          if (!data) continue;
          if (id) lastId = id;
          on(name, JSON.parse(data), id);
        }
      }
      if (!reconnect) return;
    } catch (err) {
      if (signal.aborted) return;
      if (err.status && err.status < 500) throw err;
      conn.textContent = "reconnecting…";
      if (!reconnect) throw err;
    }
    await new Promise((r) => setTimeout(r, backoff));
  }
}

// ---- routing ----

function route() {
  viewAbort.abort();
  viewAbort = new AbortController();
  const hash = location.hash.slice(1) || "/";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  for (const a of document.querySelectorAll("nav a")) a.removeAttribute("aria-current");
  let view;
  if (path.startsWith("/thread/")) {
    view = threadView(decodeURIComponent(path.slice(8)), params);
  } else if (path === "/runners") {
    mark("runners");
    view = runnersView();
  } else if (path === "/audit") {
    mark("audit");
    view = auditView(params);
  } else {
    mark("threads");
    view = threadsView(params);
  }
  view.catch((err) => show(el("p", { class: "error", role: "alert" }, explain(err))));
  // After a navigation, focus the new view: the next Tab goes into it, not
  // on from where the old view's focused control was.
  if (routed) main.focus({ preventScroll: true });
  routed = true;
}
let routed = false;

function mark(name) {
  document.querySelector(`nav a[data-nav="${name}"]`)?.setAttribute("aria-current", "page");
}

function show(...nodes) {
  main.replaceChildren(...nodes);
}

window.addEventListener("hashchange", route);

// ---- threads ----

const PAGE = 50;

async function threadsView(params) {
  const signal = viewAbort.signal;
  const state = {
    status: params.get("status") || "", q: params.get("q") || "", meta: params.get("meta") || "",
    sort: params.get("sort") || "updated", offset: Number(params.get("offset") || 0),
  };
  const status = el("select", { id: "f-status", name: "status" },
    ["", "idle", "busy", "interrupted", "error", "deleted"].map((s) => el("option", { value: s, selected: s === state.status }, s || "any")));
  const q = el("input", { id: "f-q", name: "q", type: "search", value: state.q, placeholder: "thread id contains…" });
  const meta = el("input", { id: "f-meta", name: "meta", value: state.meta, placeholder: "key=value" });
  const sort = el("select", { id: "f-sort", name: "sort" },
    [["updated", "last activity"], ["created", "created"], ["id", "thread id"]].map(([v, t]) => el("option", { value: v, selected: v === state.sort }, t)));
  const body = el("tbody");
  const info = el("span", { class: "muted", id: "page-info", role: "status" });
  const prev = el("button", { type: "button", id: "prev" }, "← Previous");
  const next = el("button", { type: "button", id: "next" }, "Next →");
  const err = el("p", { class: "error", role: "alert" });
  const filters = el("form", { class: "toolbar", role: "search", onsubmit: (e) => { e.preventDefault(); apply(0); } },
    el("label", {}, "Status", status), el("label", {}, "Search", q), el("label", {}, "Metadata", meta),
    el("label", {}, "Sort", sort), el("button", { type: "submit" }, "Apply"));
  const open = el("form", { class: "toolbar", onsubmit: (e) => {
    e.preventDefault();
    const id = e.target.elements.id.value.trim();
    if (id) location.hash = "#/thread/" + encodeURIComponent(id);
  } }, el("label", {}, "Open or start a thread", el("input", { name: "id", id: "open-id", placeholder: "thread id", required: true })),
  el("button", { type: "submit" }, "Open"));
  show(el("h1", {}, "Threads"), filters, open, err,
    el("table", { id: "threads" }, el("thead", {}, el("tr", {},
      ["Thread", "State", "Holder", "Claim", "Active run", "Pending", "Open requests", "Last activity"].map((h) => el("th", { scope: "col" }, h)))), body),
    el("div", { class: "pager" }, prev, next, info));

  function apply(offset) {
    state.offset = offset;
    state.status = status.value; state.q = q.value.trim(); state.meta = meta.value.trim(); state.sort = sort.value;
    const p = new URLSearchParams();
    for (const k of ["status", "q", "meta", "sort"]) if (state[k] && !(k === "sort" && state[k] === "updated")) p.set(k, state[k]);
    if (offset) p.set("offset", offset);
    history.replaceState(null, "", "#/" + (p.toString() ? "?" + p : ""));
    load();
  }
  prev.addEventListener("click", () => apply(Math.max(0, state.offset - PAGE)));
  next.addEventListener("click", () => apply(state.offset + PAGE));

  let loading = false, again = false;
  async function load() {
    if (loading) { again = true; return; }
    loading = true;
    try {
      const p = new URLSearchParams({ offset: state.offset, limit: PAGE, sort: state.sort });
      if (state.status) p.set("status", state.status);
      if (state.q) p.set("q", state.q);
      if (state.meta) p.set("meta", state.meta);
      const page = await api("GET", "/artifactr/threads?" + p);
      err.textContent = "";
      body.replaceChildren(...page.threads.map(threadRow));
      if (!page.threads.length) body.append(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No threads match.")));
      const lo = page.total ? state.offset + 1 : 0;
      info.textContent = `${lo}–${state.offset + page.threads.length} of ${page.total} (as of seq ${page.seq})`;
      prev.disabled = state.offset === 0;
      next.disabled = state.offset + PAGE >= page.total;
    } catch (e) {
      err.textContent = explain(e);
    } finally {
      loading = false;
      if (again) { again = false; load(); }
    }
  }
  await load();
  sse("/artifactr/threads/live", (name) => { if (name === "changed") load(); }, signal).catch(() => {});
}

function threadRow(t) {
  const link = el("a", { href: "#/thread/" + encodeURIComponent(t.thread), title: t.thread }, short(t.thread, 48));
  return el("tr", { dataset: { thread: t.thread } },
    el("td", { class: "id" }, link),
    el("td", {}, el("span", { class: "state state-" + t.state }, t.state)),
    el("td", { class: "id", title: t.holder }, t.holder ? short(t.holder, 32) + (t.released ? " (released)" : "") : "—"),
    el("td", {}, t.claim_seq ? "#" + t.claim_seq : "—"),
    el("td", { class: "id" }, t.active_run || "—"),
    el("td", {}, String(t.pending)),
    el("td", {}, String((t.open_requests || []).length)),
    el("td", {}, when(t.last_activity)));
}

// ---- one thread ----

// REFUSED_BY names what refused a stale write (console.ByFence, ByCAS).
const REFUSED_BY = { fence: "the fence", "compare-and-set": "the run's compare-and-set" };

const KIND = { message_posted: "posted", thread_claimed: "claim", thread_released: "claim" };

async function threadView(id, params) {
  const signal = viewAbort.signal;
  const selected = Number(params.get("seq") || 0);
  const timeline = el("ol", { class: "timeline", id: "timeline", "aria-label": "Timeline" });
  const refusals = el("ul", { id: "refusals" });
  const summary = el("div", { id: "summary" });
  const asOf = el("p", { class: "muted", id: "as-of" });
  const status = el("p", { role: "status", id: "action-status" });
  const err = el("p", { class: "error", role: "alert", id: "action-error" });
  const assistants = el("select", { name: "assistant", id: "post-assistant" });
  const postForm = el("form", { id: "post-form", onsubmit: (e) => { e.preventDefault(); act(postMessage); } },
    el("label", {}, "Message", el("textarea", { name: "text", id: "post-text", rows: 3, required: true })),
    el("div", { class: "toolbar" },
      el("label", {}, "Strategy", el("select", { name: "strategy", id: "post-strategy" },
        ["enqueue", "reject", "interrupt", "rollback"].map((s) => el("option", { value: s }, s)))),
      el("label", {}, "Assistant", assistants),
      el("button", { type: "submit", class: "primary" }, "Post")));
  const answerForm = el("form", { id: "answer-form", hidden: true, onsubmit: (e) => { e.preventDefault(); act(answer); } },
    el("p", { id: "question" }),
    el("label", {}, "Answer", el("input", { name: "text", id: "answer-text", required: true })),
    el("button", { type: "submit", class: "primary" }, "Answer"));
  const cancelBtn = el("button", { type: "button", id: "cancel", hidden: true, onclick: () => act(cancel) }, "Cancel the active run");
  const strategyForm = el("form", { id: "strategy-form", class: "toolbar", onsubmit: (e) => { e.preventDefault(); act(configure); } },
    el("label", {}, "Thread strategy", el("select", { name: "strategy", id: "thread-strategy" },
      ["enqueue", "reject", "interrupt", "rollback"].map((s) => el("option", { value: s }, s)))),
    el("button", { type: "submit" }, "Set"));
  const forkForm = el("form", { id: "fork-form", class: "toolbar", onsubmit: (e) => { e.preventDefault(); act(fork); } },
    el("label", {}, "Fork at seq", el("input", { name: "at", id: "fork-at", type: "number", min: 1, required: true, value: selected || "" })),
    el("label", {}, "New thread", el("input", { name: "thread", id: "fork-thread", required: true, value: id + "-fork" })),
    el("button", { type: "submit" }, "Fork"));

  show(el("h1", {}, "Thread ", el("code", { id: "thread-id" }, id)),
    el("div", { class: "grid" },
      el("section", { "aria-label": "Timeline" }, el("div", { class: "panel" }, el("h2", {}, "Timeline"),
        el("p", { class: "muted" }, "Every stored event, live. A claim's seq is its fencing token: JetStream accepts a consuming write only while its claim marker is the thread's newest."),
        timeline)),
      el("aside", {},
        el("div", { class: "panel" }, el("h2", {}, "State"), asOf, summary),
        el("div", { class: "panel" }, el("h2", {}, "Actions"), status, err, postForm, answerForm, cancelBtn),
        el("div", { class: "panel" }, el("h3", {}, "Strategy"), strategyForm),
        el("div", { class: "panel" }, el("h3", {}, "Fork"), forkForm),
        el("div", { class: "panel" }, el("h3", {}, "Refused writes (this server's runner)"), refusals))));

  api("POST", "/assistants/search", { limit: 100 }).then((as) => {
    assistants.replaceChildren(...as.map((a) => el("option", { value: a.assistant_id }, a.name || a.graph_id)));
  }).catch(() => {});

  let fold = null;
  let shownStrategy = "";
  let atSeq = selected;
  async function loadFold() {
    try {
      fold = await api("GET", `/artifactr/threads/${encodeURIComponent(id)}/fold` + (atSeq ? "?at=" + atSeq : ""));
    } catch (e) {
      if (e.status === 404) { fold = null; summary.replaceChildren(el("p", { class: "muted" }, "No events yet: post a message to start this thread.")); return; }
      throw e;
    }
    renderFold();
  }
  function renderFold() {
    asOf.replaceChildren(atSeq ? "As of seq " + atSeq + " " : "Latest ",
      atSeq ? el("button", { type: "button", id: "as-of-latest", onclick: () => { atSeq = 0; select(0); loadFold(); } }, "Show latest") : "");
    if (!fold) return;
    const run = fold.ActiveRun;
    const open = Object.values(fold.Requests || {}).filter((r) => !r.Answered && !r.Closed);
    const pending = (fold.Messages || []).filter((m) => !m.Consumed).length;
    summary.replaceChildren(el("dl", { class: "kv" },
      el("dt", {}, "Holder"), el("dd", { id: "holder" }, fold.Claim.Holder ? fold.Claim.Holder + (fold.Claim.Released ? " (released)" : "") : "—"),
      el("dt", {}, "Fencing token"), el("dd", { id: "fence" }, fold.Claim.Seq ? "#" + fold.Claim.Seq : "—"),
      el("dt", {}, "Active run"), el("dd", { id: "active-run" }, run ? run.ID : "none"),
      el("dt", {}, "Taken up to"), el("dd", {}, fold.Taken ? "seq " + fold.Taken : "—"),
      el("dt", {}, "Pending"), el("dd", { id: "pending" }, String(pending)),
      el("dt", {}, "Open requests"), el("dd", { id: "open-requests" }, String(open.length)),
      el("dt", {}, "Strategy"), el("dd", {}, fold.Strategy || "enqueue"),
      el("dt", {}, "Anomalies"), el("dd", {}, String((fold.Anomalies || []).length)),
      fold.Fork ? [el("dt", {}, "Forked from"), el("dd", {}, el("a", { href: "#/thread/" + encodeURIComponent(fold.Fork.Source) + "?seq=" + fold.Fork.SourceSeq }, fold.Fork.Source + " @ " + fold.Fork.SourceSeq))] : []));
    if (atSeq) return;
    // The strategy form starts at the thread's strategy, and follows it
    // when it changes, not while someone picks another.
    const strategy = fold.Strategy || "enqueue";
    if (strategy !== shownStrategy) strategyForm.elements.strategy.value = shownStrategy = strategy;
    answerForm.hidden = open.length === 0;
    if (open.length) document.getElementById("question").textContent = "Question: " + open[0].Question;
    cancelBtn.hidden = !run;
  }

  function select(seq) {
    for (const li of timeline.querySelectorAll("li.selected")) li.classList.remove("selected");
    if (!seq) return;
    const li = timeline.querySelector(`li[data-seq="${seq}"]`);
    if (li) { li.classList.add("selected"); li.scrollIntoView({ block: "center" }); }
  }

  let refreshTimer = null;
  function refreshSoon() {
    if (atSeq) return;
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(() => loadFold().catch(() => {}), 100);
  }

  async function act(fn) {
    err.textContent = ""; status.textContent = "";
    try {
      status.textContent = await fn();
    } catch (e) {
      err.textContent = explain(e);
    }
    refreshSoon();
  }
  async function postMessage() {
    const text = postForm.elements.text.value;
    const body = { input: { messages: [{ role: "user", content: text }] }, multitask_strategy: postForm.elements.strategy.value, if_not_exists: "create" };
    if (assistants.value) body.assistant_id = assistants.value;
    const run = await api("POST", `/threads/${encodeURIComponent(id)}/runs`, body);
    postForm.elements.text.value = "";
    return "Posted: run " + run.run_id + " is " + run.status + ".";
  }
  async function answer() {
    const text = answerForm.elements.text.value;
    const body = { command: { resume: text } };
    if (assistants.value) body.assistant_id = assistants.value;
    await api("POST", `/threads/${encodeURIComponent(id)}/runs`, body);
    answerForm.elements.text.value = "";
    return "Answered.";
  }
  async function cancel() {
    const runs = await api("GET", `/threads/${encodeURIComponent(id)}/runs?limit=20`);
    const active = runs.find((r) => r.status === "running" || r.status === "pending");
    if (!active) throw new ApiError(409, "no run is active");
    await api("POST", `/threads/${encodeURIComponent(id)}/runs/${encodeURIComponent(active.run_id)}/cancel`, {});
    return "Cancel requested for run " + active.run_id + ".";
  }
  async function configure() {
    const r = await api("POST", `/artifactr/threads/${encodeURIComponent(id)}/configure`, { strategy: strategyForm.elements.strategy.value });
    return "Strategy set (seq " + r.seq + ").";
  }
  async function fork() {
    const at = Number(forkForm.elements.at.value), to = forkForm.elements.thread.value.trim();
    await api("POST", `/artifactr/threads/${encodeURIComponent(id)}/fork`, { at, thread: to });
    location.hash = "#/thread/" + encodeURIComponent(to);
    return "Forked.";
  }

  await loadFold();
  let refusedSeen = 0, lostSeen = 0;
  sse(`/artifactr/threads/${encodeURIComponent(id)}/events`, (name, data) => {
    if (name === "event") {
      timeline.append(eventItem(data, (seq) => {
        atSeq = seq; forkForm.elements.at.value = seq; select(seq); loadFold().catch(() => {});
      }));
      if (data.seq === selected) select(selected);
      refreshSoon();
    } else if (name === "refused") {
      // A reconnect sends the kept refusals again: each has its seq.
      if (data.seq <= refusedSeen) return;
      refusedSeen = data.seq;
      const by = REFUSED_BY[data.by] || data.by || "the store";
      refusals.append(el("li", { class: "refused" }, `${when(data.time)}: ${data.type} by ${data.holder} (claim #${data.claim_seq}) refused by ${by}: ${data.reason}`));
      timeline.append(el("li", { class: "refused refused-by-" + (data.by || "unknown"), dataset: { type: "refused", by: data.by || "" } }, el("div", { class: "ev-head" },
        el("span", { class: "ev-seq" }, "—"), el("span", { class: "ev-type" }, "refused " + data.type),
        el("span", { class: "badge bad" }, "stale write refused by " + by),
        el("span", { class: "muted" }, `holder ${data.holder}, claim #${data.claim_seq}: ${data.reason}`))));
    } else if (name === "refused_lost") {
      if (data.through <= lostSeen) return;
      lostSeen = data.through;
      const text = "Some refused writes of this thread are not shown: " + data.detail + ".";
      refusals.append(el("li", { class: "refused-lost" }, text));
      timeline.append(el("li", { class: "refused refused-lost", dataset: { type: "refused_lost" } }, el("div", { class: "ev-head" },
        el("span", { class: "ev-seq" }, "—"), el("span", { class: "badge bad" }, "refusals dropped"), el("span", { class: "muted" }, text))));
    } else if (name === "error") {
      err.textContent = explain(new ApiError(0, data.detail));
    }
  }, signal).catch((e) => { err.textContent = explain(e); });
}

// eventItem renders one timeline event; onAt selects "as of" its seq.
function eventItem(ev, onAt) {
  const b = ev.body || {};
  const badges = [];
  const cls = ["ev-" + ev.type, "kind-" + (KIND[ev.type] || "run")];
  if (ev.takeover) {
    cls.push("takeover");
    badges.push(el("span", { class: "badge warn" }, `takeover of claim #${ev.takeover.seq} (${short(ev.takeover.holder, 28)})`));
  }
  if (ev.abandons) badges.push(el("span", { class: "badge warn" }, "must abandon " + ev.abandons));
  if (ev.type === "run_abandoned") badges.push(el("span", { class: "badge warn" }, "abandoned"));
  if (ev.consumes) badges.push(el("span", { class: "badge info" }, `takes #${ev.consumes.seq} as ${ev.consumes.kind}`));
  for (const a of ev.anomalies || []) {
    cls.push("anomaly");
    badges.push(el("span", { class: "badge bad" }, "anomaly: " + a));
  }
  if (ev.error) {
    cls.push("anomaly");
    badges.push(el("span", { class: "badge bad" }, "malformed: " + ev.error));
  }
  let who = "";
  if (ev.type === "message_posted") who = "by " + (b.author || "anonymous");
  else if (ev.type === "thread_claimed") who = `holder ${short(ev.holder, 32)}, fencing token #${ev.seq}`;
  else if (ev.holder) who = `holder ${short(ev.holder, 32)}, claim #${ev.claim_seq}`;
  let text = "";
  switch (ev.type) {
    case "message_posted": text = b.text; break;
    case "run_output": text = b.text ?? b.output; break;
    case "run_completed": text = b.output; break;
    case "run_failed": case "run_abandoned": text = b.reason; break;
    case "request_opened": text = "asks: " + (b.question ?? ""); break;
    case "thread_released": text = b.reason ? "reason: " + b.reason : ""; break;
    case "thread_configured": text = "strategy: " + (b.strategy || "enqueue"); break;
    case "thread_forked": text = `from ${b.source_thread} @ ${b.source_seq}`; break;
    case "cancel_requested": text = b.run_id ? "run " + b.run_id : "the active run"; break;
  }
  const atBtn = el("button", { type: "button", class: "as-of", title: "Show the thread as of this event", onclick: () => onAt(ev.seq) }, "as of");
  return el("li", { class: cls.join(" "), dataset: { seq: ev.seq, type: ev.type } },
    el("div", { class: "ev-head" },
      el("span", { class: "ev-seq" }, "#" + ev.seq),
      el("span", { class: "ev-type" }, ev.type),
      ev.run ? el("span", { class: "muted" }, ev.run) : "",
      el("span", { class: "muted" }, who),
      el("time", { class: "muted", datetime: ev.time }, when(ev.time)),
      badges, atBtn),
    text ? el("p", { class: "ev-text" }, text) : "");
}

// ---- runners ----

async function runnersView() {
  const signal = viewAbort.signal;
  const body = el("div", { id: "runners" });
  show(el("h1", {}, "Runners and health"), body);
  for (;;) {
    const r = await api("GET", "/artifactr/runners");
    const m = r.metrics || {};
    const lag = r.projector;
    body.replaceChildren(
      el("div", { class: "panel" }, el("h2", {}, "Live sessions"),
        el("table", { id: "sessions" }, el("thead", {}, el("tr", {}, ["Runner", "Session", "Threads held", "Lease expires", "TTL"].map((h) => el("th", { scope: "col" }, h)))),
          el("tbody", {}, (r.sessions || []).map((s) => el("tr", {},
            el("td", {}, s.runner), el("td", { class: "id" }, s.session), el("td", {}, String(s.held)),
            el("td", { class: s.live ? "" : "error" }, when(s.expires) + (s.live ? "" : " (lapsed)")), el("td", {}, s.ttl_ms + " ms")))))),
      el("div", { class: "panel" }, el("h2", {}, "This server's runner"),
        el("dl", { class: "kv", id: "metrics" }, Object.entries(m).sort().flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))]))),
      el("div", { class: "panel" }, el("h2", {}, "Recent takeovers and fence refusals"),
        (r.recent || []).length ? el("ul", { id: "recent" }, r.recent.slice().reverse().map((x) => el("li", {},
          `${when(x.time)} `, el("a", { href: "#/thread/" + encodeURIComponent(x.thread) }, x.thread), `: ${x.type} by ${x.holder} (claim #${x.claim_seq}): ${x.reason}`)))
          : el("p", { class: "muted" }, "None since this server started.")),
      el("div", { class: "panel", id: "projector" }, el("h2", {}, "Thread-summaries projector"),
        lag ? el("dl", { class: "kv" },
          el("dt", {}, "Checkpoint"), el("dd", {}, `seq ${lag.checkpoint} of ${lag.stream_last_seq}`),
          el("dt", {}, "Behind"), el("dd", { class: lag.behind > 1000 ? "error" : "" }, `${lag.behind} events`),
          el("dt", {}, "Owner"), el("dd", {}, (lag.owner || "none") + (lag.owner_live ? " (live)" : " (not live)")))
          : el("p", { class: "error" }, r.projector_error || "unknown")));
    await new Promise((res) => setTimeout(res, 2000));
    if (signal.aborted) return;
  }
}

// ---- audit ----

async function auditView(params) {
  const signal = viewAbort.signal;
  const thread = el("input", { id: "audit-thread", name: "thread", placeholder: "all threads", value: params.get("thread") || "" });
  const specBox = el("input", { id: "audit-spec", name: "spec", type: "checkbox" });
  const bar = el("progress", { id: "audit-progress", max: 1, value: 0 });
  const info = el("p", { class: "muted", role: "status", id: "audit-status" });
  const out = el("div", { id: "audit-report" });
  const form = el("form", { class: "toolbar", onsubmit: (e) => { e.preventDefault(); run(); } },
    el("label", {}, "Thread", thread), el("label", {}, el("span", {}, "With the spec (--spec)"), specBox),
    el("button", { type: "submit", class: "primary", id: "audit-run" }, "Run audit"));
  show(el("h1", {}, "Audit"), el("p", { class: "muted" }, "Replays the log and checks I1, I3, the fence and the claim chain, as `artifactr audit` does."), form, bar, info, out);

  async function run() {
    out.replaceChildren();
    info.textContent = "Replaying…";
    const body = { thread: thread.value.trim(), spec: specBox.checked };
    try {
      await sse("/artifactr/audit", (name, d) => {
        if (name === "progress") {
          bar.max = Math.max(d.last_seq, 1); bar.value = d.seq;
          info.textContent = `${d.events} events read, seq ${d.seq} of ${d.last_seq}`;
        } else if (name === "report") {
          renderReport(d, out);
          info.textContent = d.ok ? "No violations." : "Violations found.";
        } else if (name === "error") {
          info.textContent = "";
          out.replaceChildren(el("p", { class: "error" }, d.detail));
        }
      }, signal, { method: "POST", body, reconnect: false });
    } catch (e) {
      out.replaceChildren(el("p", { class: "error", role: "alert" }, explain(e)));
    }
  }
}

function findingItem(thread, seqs, label, message) {
  const last = seqs && seqs.length ? seqs[seqs.length - 1] : 0;
  return el("li", {}, el("strong", {}, label), " ",
    thread ? el("a", { href: "#/thread/" + encodeURIComponent(thread) + (last ? "?seq=" + last : "") }, thread + (last ? " @ " + last : "")) : "",
    ": ", message);
}

function renderReport(d, out) {
  const a = d.audit;
  const nodes = [el("p", { class: d.ok ? "ok" : "error", id: "audit-verdict" },
    `${a.events} events of ${a.threads} threads: ${a.violation_count} violations, ${a.anomaly_count} anomalies` +
    (d.spec ? `; spec: ${d.spec.nonconforming?.length || 0} threads do not conform` : ""))];
  if (a.violations?.length) nodes.push(el("h2", {}, "Violations"), el("ul", { id: "violations" }, a.violations.map((v) => findingItem(v.thread, v.seqs, v.check, v.message))));
  if (a.anomalies?.length) nodes.push(el("h2", {}, "Anomalies"), el("ul", { id: "anomalies" }, a.anomalies.map((f) => findingItem(f.thread, f.seq ? [f.seq] : f.seqs, f.type || "anomaly", f.reason || f.message))));
  if (d.spec?.nonconforming?.length) nodes.push(el("h2", {}, "Not a step of the spec"), el("ul", { id: "nonconforming" }, d.spec.nonconforming.map((n) => findingItem(n.thread, n.seq ? [n.seq] : [], n.type || "event", n.reason || JSON.stringify(n)))));
  out.replaceChildren(...nodes);
}

route();
