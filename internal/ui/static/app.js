// agentd's dashboard. It uses only agentd's public HTTP API and its event
// stream: no framework, no build step, no private endpoint. The event
// stream is read with fetch (not EventSource) so that the page chooses the
// Last-Event-ID it resumes from, knows when the connection dropped, and can
// say which events it caught up on afterwards.

// ---------- small helpers ----------

// h builds an element. Text is always set as text, never parsed as HTML:
// everything shown comes from models, tools and clients.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function fmtTime(ms) {
  if (!ms) return "";
  const d = new Date(ms);
  return d.toLocaleString();
}

function fmtDuration(ms) {
  if (ms == null || ms < 0) return "";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

function short(s, n) {
  s = String(s ?? "");
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

// api calls agentd and returns the decoded JSON (null for 204). A failure
// throws an Error carrying the server's own message.
async function api(method, path, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  if (resp.status === 204) return null;
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!resp.ok) {
    const msg = data?.data?.message || data?.message || data?.error || `${resp.status} ${resp.statusText}`;
    const err = new Error(msg);
    err.status = resp.status;
    throw err;
  }
  return data;
}

function notice(text) {
  const el = document.getElementById("notice");
  el.textContent = text;
  el.hidden = !text;
}

// ---------- the event stream ----------

// EventStream follows an SSE route with fetch. After a drop it reconnects
// with Last-Event-ID set to the last durable seq it saw, so the server
// replays exactly what was missed; onCaughtUp then reports those events.
class EventStream {
  constructor(url, { onEvent, onState, onCaughtUp, from }) {
    this.url = url;
    this.onEvent = onEvent;
    this.onState = onState || (() => {});
    this.onCaughtUp = onCaughtUp || (() => {});
    this.last = from ?? null; // last durable seq seen
    this.stopped = false;
    this.attempt = 0;
  }

  start() { this.loop(); return this; }

  stop() {
    this.stopped = true;
    this.ctrl?.abort();
  }

  async loop() {
    while (!this.stopped) {
      const resumed = this.attempt > 0 || this.last !== null;
      const before = this.last;
      try {
        await this.connect(resumed, before);
      } catch (e) {
        if (this.stopped) return;
      }
      if (this.stopped) return;
      this.attempt++;
      const delay = Math.min(5000, 250 * 2 ** Math.min(this.attempt, 5));
      this.onState("reconnecting", { attempt: this.attempt, delay });
      await new Promise((r) => setTimeout(r, delay));
    }
  }

  async connect(resumed, before) {
    this.ctrl = new AbortController();
    const headers = { Accept: "text/event-stream" };
    if (this.last !== null) headers["Last-Event-ID"] = String(this.last);
    const resp = await fetch(this.url, { headers, signal: this.ctrl.signal, cache: "no-store" });
    if (!resp.ok || !resp.body) throw new Error(`event stream: ${resp.status}`);
    if (this.last === null) {
      // Opened without a cursor: resume from the log's head at this moment
      // after a drop, even if no durable event arrives meanwhile.
      const head = Number(resp.headers.get("X-Agentd-Seq"));
      if (Number.isFinite(head)) this.last = head;
    }
    this.attempt = 0;
    this.onState("live");
    const missed = [];
    let quiet = null;
    const settle = () => {
      // The replay after a reconnect arrives at once; a pause in the flow
      // ends it.
      clearTimeout(quiet);
      quiet = setTimeout(() => {
        if (resumed && before !== null) this.onCaughtUp(missed.slice(), before);
        resumed = false;
      }, 400);
    };
    if (resumed) settle();

    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    let watchdog;
    const arm = () => {
      clearTimeout(watchdog);
      // The server sends a heartbeat every 10 s: silence for longer means
      // the connection is dead even if no error says so.
      watchdog = setTimeout(() => this.ctrl.abort(), 25000);
    };
    arm();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        buf += decoder.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let id = null;
          const data = [];
          for (const line of frame.split("\n")) {
            if (line.startsWith("id:")) id = line.slice(3).trim();
            else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
          }
          if (!data.length) continue;
          let ev;
          try { ev = JSON.parse(data.join("\n")); } catch { continue; }
          if (id !== null) {
            ev.seq = Number(id);
            if (this.last !== null && ev.seq <= this.last) continue; // already seen
            this.last = ev.seq;
            if (resumed) { missed.push(ev); settle(); }
          }
          this.onEvent(ev);
        }
      }
    } finally {
      clearTimeout(watchdog);
      clearTimeout(quiet);
    }
  }
}

// ---------- shared state ----------

const state = {
  sessions: new Map(), // id → session
  status: new Map(), // id → agentd's full status (with last outcome)
  permissions: new Map(), // id → pending permission request
  questions: new Map(), // id → pending question request
  defaultModel: "", // the server's default model, for sessions that chose none
  view: null,
};

// loadSessions reads the newest sessions and their statuses (which carry
// each one's last outcome) into state.
async function loadSessions() {
  const list = await api("GET", "/session?limit=200");
  for (const s of list) state.sessions.set(s.id, s);
  await Promise.all(list.slice(0, 100).map(async (s) => {
    try { state.status.set(s.id, await api("GET", `/session/${encodeURIComponent(s.id)}/status`)); } catch { /* deleted meanwhile */ }
  }));
}

// takeInitial fills state from the sessions and statuses the page carries
// inline (the server writes them into it), once: the first view draws
// from them at once, before the page's load event.
function takeInitial() {
  const el = document.getElementById("initial");
  const text = el?.textContent;
  el?.remove();
  if (!text) return false;
  try {
    const data = JSON.parse(text);
    for (const s of data.sessions || []) state.sessions.set(s.id, s);
    for (const [id, st] of Object.entries(data.status || {})) state.status.set(id, st);
    return true;
  } catch {
    return false;
  }
}

// needsMe counts what waits for a person: asks and questions nobody
// answered, sessions retrying, sessions whose last run failed.
function needsMe() {
  let retrying = 0, failed = 0;
  for (const [id, st] of state.status) {
    if (!state.sessions.has(id)) continue;
    if (st.type === "retry") retrying++;
    else if (st.type === "idle" && st.last?.outcome === "failed") failed++;
  }
  return { asks: state.permissions.size + state.questions.size, retrying, failed };
}

function updateNeedsMe() {
  const el = document.getElementById("attention-count");
  if (!el) return;
  const n = needsMe();
  const total = n.asks + n.retrying + n.failed;
  el.textContent = total ? String(total) : "";
  el.dataset.count = String(total);
  el.hidden = !total;
}

async function deleteSession(id, title) {
  if (!confirm(`Delete the session "${title || id}" and its transcript? This cannot be undone.`)) return false;
  try {
    await api("DELETE", `/session/${encodeURIComponent(id)}`);
    state.sessions.delete(id);
    state.status.delete(id);
    return true;
  } catch (e) {
    notice(`Delete: ${e.message}`);
    return false;
  }
}

function sumTokens(t) {
  if (!t) return 0;
  return (t.input || 0) + (t.output || 0) + (t.reasoning || 0) + (t.cache?.read || 0) + (t.cache?.write || 0);
}

// inState says for how long a session has been in its status: busy since
// its run started, idle since its last run ended; a retry says when the
// next attempt is.
function inState(st, now) {
  if (!st) return "";
  if (st.type === "retry") return st.next ? `next try ${st.next > now ? "in " + fmtDuration(st.next - now) : "now"}` : "";
  if (st.type === "busy") return st.since ? fmtDuration(now - st.since) : "";
  return st.last?.time ? `${fmtDuration(now - st.last.time)} ago` : "";
}

const statusTimers = new Map();

// refreshStatus re-reads a session's status from the server (which derives
// it from the store) a moment after an event says it changed.
function refreshStatus(id, delay = 60) {
  clearTimeout(statusTimers.get(id));
  statusTimers.set(id, setTimeout(async () => {
    statusTimers.delete(id);
    try {
      state.status.set(id, await api("GET", `/session/${encodeURIComponent(id)}/status`));
    } catch (e) {
      if (e.status === 404) { state.sessions.delete(id); state.status.delete(id); }
    }
    state.view?.changed?.();
  }, delay));
}

async function loadPermissions() {
  const [perms, questions] = await Promise.all([api("GET", "/permission"), api("GET", "/question")]);
  state.permissions = new Map(perms.map((p) => [p.id, p]));
  state.questions = new Map(questions.map((q) => [q.id, q]));
}

function onEvent(ev) {
  const p = ev.properties || {};
  switch (ev.type) {
    case "session.created":
    case "session.updated":
      if (p.info) {
        state.sessions.set(p.info.id, p.info);
        if (!state.status.has(p.info.id)) refreshStatus(p.info.id, 0);
      }
      break;
    case "session.deleted":
      if (p.info) { state.sessions.delete(p.info.id); state.status.delete(p.info.id); }
      break;
    case "session.status":
    case "session.idle":
    case "run.updated":
      refreshStatus(p.sessionID || p.run?.sessionID || p.info?.sessionID);
      break;
    case "permission.asked":
      if (p.id) state.permissions.set(p.id, p);
      break;
    case "permission.replied":
      state.permissions.delete(p.requestID || p.permissionID || p.id);
      break;
    case "question.asked":
      if (p.id) state.questions.set(p.id, p);
      break;
    case "question.replied":
    case "question.rejected":
      state.questions.delete(p.requestID || p.id);
      break;
  }
  state.view?.onEvent?.(ev);
  state.view?.changed?.();
  updateNeedsMe();
}

function statusBadge(st) {
  if (!st) return h("span", { class: "badge muted" }, "…");
  const label = st.type === "busy" && st.phase ? `busy · ${st.phase.replace(/_/g, " ")}` :
    st.type === "retry" ? `retry ${st.attempt ?? ""}` : st.type;
  return h("span", { class: `badge s-${st.type}`, dataset: { testid: "status", status: st.type } }, label);
}

function outcomeBadge(outcome, reason) {
  if (!outcome) return "";
  return h("span", { class: `badge o-${outcome}`, dataset: { testid: "outcome", outcome } },
    reason ? `${outcome} · ${reason.replace(/_/g, " ")}` : outcome);
}

// ---------- sessions ----------

class SessionsView {
  constructor() {
    this.search = "";
    this.filterStatus = "";
  }

  async mount(root) {
    this.root = root;
    if (!takeInitial()) await loadSessions();
    updateNeedsMe();
    this.render();
    // Times in state move on without events.
    this.tick = setInterval(() => {
      const now = Date.now();
      for (const el of this.root.querySelectorAll("[data-testid=in-state]")) el.textContent = inState(state.status.get(el.dataset.id), now);
    }, 1000);
  }

  unmount() { clearInterval(this.tick); }

  changed() { this.schedule(); }

  schedule() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => { this.pending = null; this.renderTable(); });
  }

  render() {
    const dir = h("input", { type: "search", placeholder: "search title, id or directory", value: this.search, dataset: { testid: "search" },
      oninput: (e) => { this.search = e.target.value; this.renderTable(); } });
    const st = h("select", { dataset: { testid: "filter-status" }, onchange: (e) => { this.filterStatus = e.target.value; this.renderTable(); } },
      ...["", "busy", "retry", "idle"].map((v) => h("option", { value: v, selected: v === this.filterStatus }, v || "any status")));
    const title = h("input", { placeholder: "title (optional)", dataset: { testid: "new-title" } });
    const directory = h("input", { placeholder: "directory (default: the server's)", dataset: { testid: "new-dir" } });
    const create = h("button", { class: "primary", dataset: { testid: "new-session" }, onclick: async () => {
      try {
        const body = {};
        if (title.value) body.title = title.value;
        const path = directory.value ? `/session?directory=${encodeURIComponent(directory.value)}` : "/session";
        const s = await api("POST", path, body);
        state.sessions.set(s.id, s);
        location.hash = `#/session/${s.id}`;
      } catch (e) { notice(`Create session: ${e.message}`); }
    } }, "New session");
    this.table = h("div");
    this.root.replaceChildren(
      h("h1", {}, "Sessions"),
      h("div", { class: "toolbar" }, title, directory, create),
      h("div", { class: "toolbar" }, dir, st),
      this.table);
    this.renderTable();
  }

  renderTable() {
    if (!this.table) return;
    const key = JSON.stringify([this.search, this.filterStatus, state.defaultModel, [...state.sessions.values()], [...state.status.entries()]]);
    if (key === this.key) return;
    this.key = key;
    const q = this.search.trim().toLowerCase();
    const now = Date.now();
    const rows = [...state.sessions.values()]
      .filter((s) => !q || [s.title, s.id, s.directory].some((f) => (f || "").toLowerCase().includes(q)))
      .filter((s) => !this.filterStatus || (state.status.get(s.id)?.type || "idle") === this.filterStatus)
      .sort((a, b) => (b.time?.updated || 0) - (a.time?.updated || 0));
    const body = rows.map((s) => {
      const st = state.status.get(s.id);
      return h("tr", { class: "link", dataset: { testid: "session-row", id: s.id }, onclick: () => { location.hash = `#/session/${s.id}`; } },
        h("td", {}, s.title || h("span", { class: "muted" }, "(untitled)"), s.parentID ? h("span", { class: "muted" }, " · subagent") : ""),
        h("td", { class: "mono muted" }, short(s.directory, 50)),
        h("td", {}, statusBadge(st), " ", h("span", { class: "muted", dataset: { testid: "in-state", id: s.id } }, inState(st, now))),
        h("td", { class: "mono muted", dataset: { testid: "model" } }, s.model ? `${s.model.providerID}/${s.model.id}` :
          state.defaultModel ? h("span", { title: "the server's default model" }, `${state.defaultModel} (default)`) : ""),
        h("td", { class: "mono", dataset: { testid: "tokens" } }, sumTokens(s.tokens) || ""),
        h("td", { class: "mono", dataset: { testid: "cost" } }, s.cost ? `$${s.cost.toFixed(4)}` : ""),
        h("td", {}, outcomeBadge(st?.last?.outcome, st?.last?.reason)),
        h("td", { class: "muted" }, fmtTime(s.time?.updated)),
        h("td", {}, h("button", { class: "danger small", title: "Delete this session", dataset: { testid: "delete-session" },
          onclick: async (e) => { e.stopPropagation(); if (await deleteSession(s.id, s.title)) { this.key = null; this.renderTable(); updateNeedsMe(); } } }, "Delete")));
    });
    this.table.replaceChildren(rows.length ? h("table", {},
      h("thead", {}, h("tr", {}, ...["Session", "Directory", "Status", "Model", "Tokens", "Cost", "Last run", "Updated", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, body)) : h("p", { class: "muted" }, "No sessions match."));
  }
}

// ---------- one session ----------

class SessionView {
  constructor(id) {
    this.id = id;
    this.messages = new Map(); // id → {info, parts: Map(id → part)}
    this.order = [];
    this.runs = [];
    this.toolOpen = new Map(); // part id → opened or closed by the reader
  }

  async mount(root) {
    this.root = root;
    const enc = encodeURIComponent(this.id);
    const [session, msgs, runs, status] = await Promise.all([
      api("GET", `/session/${enc}`), api("GET", `/session/${enc}/message`),
      api("GET", `/session/${enc}/run`), api("GET", `/session/${enc}/status`)]);
    state.sessions.set(session.id, session);
    state.status.set(session.id, status);
    for (const m of msgs) this.upsertMessage(m.info, m.parts);
    this.runs = runs;
    this.render();
  }

  upsertMessage(info, parts) {
    let m = this.messages.get(info.id);
    if (!m) {
      m = { info, parts: new Map() };
      this.messages.set(info.id, m);
      this.order.push(info.id);
    }
    m.info = info;
    for (const p of parts || []) m.parts.set(p.id, p);
    m.dirty = true;
    return m;
  }

  onEvent(ev) {
    const p = ev.properties || {};
    const sid = p.sessionID || p.info?.sessionID || p.part?.sessionID || p.run?.sessionID;
    if (sid !== this.id) return;
    switch (ev.type) {
      case "message.updated":
        this.upsertMessage(p.info);
        break;
      case "message.removed":
        this.messages.delete(p.messageID);
        this.order = this.order.filter((id) => id !== p.messageID);
        break;
      case "message.part.updated": {
        const part = p.part;
        const m = this.messages.get(part.messageID) || this.upsertMessage({ id: part.messageID, sessionID: this.id, role: "assistant", time: {} });
        m.parts.set(part.id, part);
        m.dirty = true;
        break;
      }
      case "message.part.removed": {
        const m = this.messages.get(p.messageID);
        if (m) { m.parts.delete(p.partID); m.dirty = true; }
        break;
      }
      case "message.part.delta": {
        // Live-only streamed text: appended to the part until its next
        // durable update replaces it with the stored text.
        const m = this.messages.get(p.messageID);
        if (!m) break;
        let part = m.parts.get(p.partID);
        if (!part) {
          part = { id: p.partID, messageID: p.messageID, sessionID: this.id, type: "text", text: "" };
          m.parts.set(p.partID, part);
        }
        if (p.field === "text") part.text = (part.text || "") + p.delta;
        m.dirty = true;
        break;
      }
      case "run.updated": {
        const run = p.run;
        if (!run) break;
        const i = this.runs.findIndex((r) => r.id === run.id);
        if (i >= 0) this.runs[i] = run; else this.runs.unshift(run);
        break;
      }
    }
  }

  changed() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => { this.pending = null; this.update(); });
  }

  render() {
    this.head = h("div");
    this.transcript = h("div", { class: "transcript", dataset: { testid: "transcript" } });
    this.runsBox = h("div", { class: "runs", dataset: { testid: "runs" } });
    this.permBox = h("div", { dataset: { testid: "permissions" } });
    const text = h("textarea", { placeholder: "Prompt", dataset: { testid: "prompt" } });
    const policy = h("select", { dataset: { testid: "policy" }, title: "what to do when the session is busy" },
      ...[["steer", "steer into the running run"], ["queue", "queue after it"], ["interrupt", "interrupt it"], ["reject", "reject (409)"]]
        .map(([v, l]) => h("option", { value: v }, `${v}: ${l}`)));
    const send = h("button", { class: "primary", type: "submit", dataset: { testid: "send" } }, "Send");
    const form = h("form", { class: "prompt", onsubmit: async (e) => {
      e.preventDefault();
      if (!text.value.trim()) return;
      send.disabled = true;
      try {
        await api("POST", `/session/${encodeURIComponent(this.id)}/prompt_async`,
          { parts: [{ type: "text", text: text.value }], busy: policy.value });
        text.value = "";
        notice("");
      } catch (err) {
        notice(`Prompt refused: ${err.message}`);
      } finally { send.disabled = false; }
    } }, text, h("div", { class: "row" }, policy, send));
    this.abort = h("button", { class: "danger", dataset: { testid: "abort" }, onclick: async () => {
      try { await api("POST", `/session/${encodeURIComponent(this.id)}/abort`); } catch (e) { notice(`Abort: ${e.message}`); }
    } }, "Abort");
    this.root.replaceChildren(
      h("p", {}, h("a", { href: "#/" }, "← Sessions")),
      this.head,
      h("div", { class: "grid" },
        h("div", { class: "panel" }, h("h2", {}, "Transcript"), this.transcript, form),
        h("div", {},
          h("div", { class: "panel" }, h("h2", {}, "Permission requests"), this.permBox),
          h("div", { class: "panel" }, h("h2", {}, "Runs"), this.runsBox))));
    this.update();
  }

  update() {
    const s = state.sessions.get(this.id) || { id: this.id };
    const st = state.status.get(this.id);
    this.head.replaceChildren(
      h("h1", {}, s.title || "(untitled)", " ", statusBadge(st), " ", this.abort),
      h("div", { class: "kv muted" },
        h("span", {}, "id"), h("span", { class: "mono" }, s.id),
        h("span", {}, "directory"), h("span", { class: "mono" }, s.directory || ""),
        st?.runID ? [h("span", {}, "run"), h("span", { class: "mono" }, st.runID)] : [],
        st?.last ? [h("span", {}, "last run"), h("span", {}, outcomeBadge(st.last.outcome, st.last.reason),
          st.last.error ? h("span", { class: "error" }, " ", st.last.error.data?.message || st.last.error.name) : "")] : []));
    this.abort.disabled = !st || st.type === "idle";

    // Only messages that changed are drawn again, so what a reader opened
    // or is about to click stays where it is.
    const atBottom = this.transcript.scrollTop + this.transcript.clientHeight >= this.transcript.scrollHeight - 30;
    const els = [];
    for (const id of this.order) {
      const m = this.messages.get(id);
      if (!m) continue;
      if (m.dirty || !m.el) {
        m.el = this.renderMessage(m);
        m.dirty = false;
      }
      els.push(m.el);
    }
    const cur = this.transcript.children;
    if (cur.length !== els.length || els.some((e, i) => cur[i] !== e)) this.transcript.replaceChildren(...els);
    if (atBottom) this.transcript.scrollTop = this.transcript.scrollHeight;

    const perms = [...state.permissions.values()].filter((p) => p.sessionID === this.id);
    const key = perms.map((p) => p.id).join(",");
    if (key !== this.permKey || !this.permBox.firstChild) {
      this.permKey = key;
      this.permBox.replaceChildren(...(perms.length ? perms.map((p) => this.renderPermission(p)) : [h("p", { class: "muted" }, "None waiting.")]));
    }
    this.renderRuns();
  }

  renderMessage(m) {
    if (!m) return null;
    const info = m.info;
    const parts = [...m.parts.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const body = parts.map((p) => this.renderPart(p)).filter(Boolean);
    if (info.error && info.error.name) {
      body.push(h("div", { class: "error", dataset: { testid: "message-error" } }, `${info.error.name}: ${info.error.data?.message || ""}`));
    }
    const meta = info.role === "assistant" ?
      ` · ${info.providerID || ""}/${info.modelID || ""}${info.tokens ? ` · ${info.tokens.input}→${info.tokens.output} tokens` : ""}${info.cost ? ` · $${info.cost.toFixed(4)}` : ""}` : "";
    return h("div", { class: `msg ${info.role}`, dataset: { testid: "message", role: info.role, id: info.id } },
      h("div", { class: "who" }, info.role, meta, " · ", fmtTime(info.time?.created)), body);
  }

  renderPart(p) {
    const idle = p.metadata?.agentd;
    if (idle && idle.type === "idle") {
      return h("div", { class: "ended", dataset: { testid: "run-ended", run: idle.runID } }, "run ended: ",
        outcomeBadge(idle.outcome, idle.reason), idle.error ? h("span", { class: "error" }, " ", idle.error.data?.message || idle.error.name) : "");
    }
    switch (p.type) {
      case "text":
        if (p.synthetic && !p.text) return null;
        return h("div", { class: "part-text", dataset: { testid: "text" } }, p.text || "");
      case "reasoning":
        return h("div", { class: "part-reasoning" }, p.text || "");
      case "tool": {
        const st = p.state || {};
        const out = st.status === "error" ? st.error : st.output;
        const open = this.toolOpen.get(p.id) ?? (st.status === "error" || st.status === "running");
        return h("details", { class: "tool", dataset: { testid: "tool", tool: p.tool, status: st.status }, open,
          ontoggle: (e) => this.toolOpen.set(p.id, e.target.open) },
          h("summary", {}, h("span", { class: "mono" }, p.tool), " ", h("span", { class: "badge" }, st.status), st.title ? ` ${short(st.title, 80)}` : ""),
          h("pre", {}, JSON.stringify(st.input ?? {}, null, 2)),
          out ? h("pre", { class: st.status === "error" ? "error" : "" }, out) : "");
      }
      case "step-finish":
      case "step-start":
        return null;
      default:
        return h("div", { class: "muted" }, `[${p.type}]`);
    }
  }

  renderPermission(p) {
    const reply = (r) => async () => {
      try {
        await api("POST", `/permission/${encodeURIComponent(p.id)}/reply`, { reply: r });
        state.permissions.delete(p.id);
        this.changed();
      } catch (e) { notice(`Reply: ${e.message}`); }
    };
    return h("div", { class: "perm", dataset: { testid: "permission", id: p.id } },
      h("div", {}, h("strong", {}, p.permission), " ", h("span", { class: "mono" }, (p.patterns || []).join(", "))),
      h("div", { class: "actions" },
        h("button", { dataset: { testid: "perm-once" }, onclick: reply("once") }, "Allow once"),
        h("button", { dataset: { testid: "perm-always" }, onclick: reply("always") }, "Always"),
        h("button", { class: "danger", dataset: { testid: "perm-reject" }, onclick: reply("reject") }, "Reject")));
  }

  // runTotals attributes each assistant message's tokens and cost to its
  // run: a run's messages come before the idle part that ends it.
  runTotals() {
    const totals = new Map();
    let acc = { input: 0, output: 0, cost: 0 };
    for (const id of this.order) {
      const m = this.messages.get(id);
      if (!m) continue;
      if (m.info.role === "assistant") {
        acc.input += m.info.tokens?.input || 0;
        acc.output += m.info.tokens?.output || 0;
        acc.cost += m.info.cost || 0;
      }
      for (const p of m.parts.values()) {
        const idle = p.metadata?.agentd;
        if (idle?.type === "idle") { totals.set(idle.runID, acc); acc = { input: 0, output: 0, cost: 0 }; }
      }
    }
    return { totals, open: acc };
  }

  renderRuns() {
    const { totals, open } = this.runTotals();
    const rows = this.runs.map((r) => {
      const t = totals.get(r.id) || (r.time?.ended ? null : open);
      const end = r.time?.ended || Date.now();
      return h("tr", { dataset: { testid: "run-row", id: r.id, state: r.state } },
        h("td", {}, ["succeeded", "failed", "interrupted"].includes(r.state) ? outcomeBadge(r.state, r.reason) :
          h("span", { class: "badge s-busy" }, (r.phase || r.state).replace(/_/g, " ")),
          r.error ? h("div", { class: "error" }, short(r.error.data?.message || r.error.name, 160)) : ""),
        h("td", {}, fmtDuration(end - r.time?.created)),
        h("td", {}, r.steps ?? ""),
        h("td", { class: "mono" }, t ? `${t.input}→${t.output}` : ""),
        h("td", { class: "mono" }, t && t.cost ? `$${t.cost.toFixed(4)}` : ""));
    });
    this.runsBox.replaceChildren(rows.length ? h("table", {},
      h("thead", {}, h("tr", {}, ...["Outcome", "Duration", "Steps", "Tokens", "Cost"].map((t) => h("th", {}, t)))),
      h("tbody", {}, rows)) : h("p", { class: "muted" }, "No runs yet."));
  }
}

// ---------- what needs me ----------

// AttentionView lists what waits for a person across every session:
// permission asks and questions nobody answered (answerable here or in
// their session), sessions retrying (with the provider's error and the
// next attempt) and sessions whose last run failed.
class AttentionView {
  async mount(root) {
    this.root = root;
    await Promise.all([loadSessions(), loadPermissions()]);
    updateNeedsMe();
    this.box = h("div");
    root.replaceChildren(h("h1", {}, "Needs me"),
      h("p", { class: "muted" }, "What waits for a person, across every session: asks and questions nobody answered, runs retrying, runs that failed."),
      this.box);
    this.render();
    this.tick = setInterval(() => this.render(), 1000);
  }

  unmount() { clearInterval(this.tick); }

  changed() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => { this.pending = null; this.render(); });
  }

  sessionLink(id) {
    const s = state.sessions.get(id);
    return h("a", { href: `#/session/${encodeURIComponent(id)}`, dataset: { testid: "attention-session" } }, s?.title || id);
  }

  render() {
    if (!this.box) return;
    const now = Date.now();
    const asks = [...state.permissions.values()].map((p) => {
      const reply = (r) => async () => {
        try {
          await api("POST", `/permission/${encodeURIComponent(p.id)}/reply`, { reply: r });
          state.permissions.delete(p.id);
          this.render();
          updateNeedsMe();
        } catch (e) { notice(`Reply: ${e.message}`); }
      };
      return h("div", { class: "perm", dataset: { testid: "attention-permission", id: p.id } },
        h("div", {}, this.sessionLink(p.sessionID), " asks for ", h("strong", {}, p.permission), " ",
          h("span", { class: "mono" }, (p.patterns || []).join(", "))),
        h("div", { class: "actions" },
          h("button", { dataset: { testid: "perm-once" }, onclick: reply("once") }, "Allow once"),
          h("button", { dataset: { testid: "perm-always" }, onclick: reply("always") }, "Always"),
          h("button", { class: "danger", dataset: { testid: "perm-reject" }, onclick: reply("reject") }, "Reject")));
    });
    const questions = [...state.questions.values()].map((q) => h("div", { class: "perm", dataset: { testid: "attention-question", id: q.id } },
      h("div", {}, this.sessionLink(q.sessionID), " asks: ", h("strong", {}, (q.questions || []).map((x) => x.question).join(" · "))),
      h("div", { class: "actions" }, h("a", { href: `#/session/${encodeURIComponent(q.sessionID)}` }, "Answer in the session →"))));
    const retrying = [], failed = [];
    for (const [id, st] of state.status) {
      if (!state.sessions.has(id)) continue;
      if (st.type === "retry") {
        retrying.push(h("tr", { dataset: { testid: "attention-retry", id } },
          h("td", {}, this.sessionLink(id)), h("td", {}, st.attempt ?? ""),
          h("td", { class: "error" }, short(st.message, 300)),
          h("td", { dataset: { testid: "next-attempt" } }, inState(st, now))));
      } else if (st.type === "idle" && st.last?.outcome === "failed") {
        failed.push(h("tr", { dataset: { testid: "attention-failed", id } },
          h("td", {}, this.sessionLink(id)), h("td", {}, outcomeBadge("failed", st.last.reason)),
          h("td", { class: "error" }, short(st.last.error?.data?.message || st.last.error?.name || "", 300)),
          h("td", { class: "muted" }, inState(st, now))));
      }
    }
    const table = (cols, rows) => h("table", {}, h("thead", {}, h("tr", {}, ...cols.map((t) => h("th", {}, t)))), h("tbody", {}, rows));
    const parts = [];
    if (asks.length || questions.length) parts.push(h("h2", {}, `Waiting for an answer (${asks.length + questions.length})`), ...asks, ...questions);
    if (retrying.length) parts.push(h("h2", {}, `Retrying (${retrying.length})`), table(["Session", "Attempt", "Error", "Next attempt"], retrying));
    if (failed.length) parts.push(h("h2", {}, `Last run failed (${failed.length})`), table(["Session", "Outcome", "Error", "Ended"], failed));
    if (!parts.length) parts.push(h("p", { class: "muted", dataset: { testid: "attention-empty" } }, "Nothing needs you."));
    this.box.replaceChildren(...parts);
  }
}

// ---------- the event log ----------

class EventsView {
  constructor() {
    this.rows = [];
    this.follow = true;
  }

  async mount(root) {
    this.root = root;
    this.render();
  }

  onEvent(ev) {
    if (this.resume) return; // a resumed view shows its own stream
    if (ev.seq === undefined) return; // live-only (deltas, heartbeats)
    this.add(ev);
  }

  add(ev, missed) {
    this.rows.push({ ev, missed });
    if (this.rows.length > 2000) this.rows.splice(0, this.rows.length - 2000);
  }

  markMissed(evs) {
    const seqs = new Set(evs.map((e) => e.seq));
    for (const r of this.rows) if (seqs.has(r.ev.seq)) r.missed = true;
    this.changed();
  }

  changed() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => { this.pending = null; this.renderTable(); });
  }

  unmount() { this.resume?.stop(); }

  render() {
    const from = h("input", { type: "number", min: "0", placeholder: "seq", dataset: { testid: "resume-seq" } });
    const go = h("button", { dataset: { testid: "resume" }, onclick: () => {
      const seq = Number(from.value);
      if (!Number.isInteger(seq) || seq < 0) { notice("Resume from: give a seq (a whole number)"); return; }
      this.resume?.stop();
      this.rows = [];
      // A stream of its own, resumed with Last-Event-ID: the server replays
      // every durable event after seq, then follows the log.
      this.resume = new EventStream("/event", { from: seq, onEvent: (ev) => { if (ev.seq !== undefined) { this.add(ev); this.changed(); } } }).start();
      this.renderTable();
    } }, "Resume from seq");
    const live = h("button", { onclick: () => { this.resume?.stop(); this.resume = null; this.rows = []; this.renderTable(); } }, "Follow live");
    this.table = h("div");
    this.root.replaceChildren(h("h1", {}, "Events"),
      h("p", { class: "muted" }, "The durable event log, newest first. Rows highlighted were missed while disconnected and replayed on reconnect."),
      h("div", { class: "toolbar" }, from, go, live), this.table);
    this.renderTable();
  }

  renderTable() {
    if (!this.table) return;
    const rows = this.rows.slice().reverse().map(({ ev, missed }) => h("tr", { class: missed ? "missed" : "", dataset: { testid: "event-row", seq: ev.seq, type: ev.type } },
      h("td", { class: "mono" }, ev.seq),
      h("td", { class: "mono" }, ev.type),
      h("td", { class: "mono muted" }, short(ev.properties?.sessionID || ev.properties?.info?.sessionID || ev.properties?.part?.sessionID || ev.properties?.run?.sessionID || "", 32)),
      h("td", { class: "mono props" }, short(JSON.stringify(ev.properties), 240))));
    this.table.replaceChildren(h("table", { class: "events" },
      h("thead", {}, h("tr", {}, ...["seq", "type", "session", "properties"].map((t) => h("th", {}, t)))),
      h("tbody", {}, rows)));
  }
}

// ---------- routing and start ----------

async function route() {
  state.view?.unmount?.();
  const main = document.getElementById("main");
  const hash = location.hash || "#/";
  let view;
  let m;
  if ((m = hash.match(/^#\/session\/([^/]+)$/))) view = new SessionView(decodeURIComponent(m[1]));
  else if (hash === "#/events") view = new EventsView();
  else if (hash === "#/attention") view = new AttentionView();
  else view = new SessionsView();
  const nav = view instanceof EventsView ? "events" : view instanceof AttentionView ? "attention" : "sessions";
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.nav === nav);
  state.view = view;
  main.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  try {
    await view.mount(main);
  } catch (e) {
    if (state.view === view) main.replaceChildren(h("p", { class: "error" }, `Could not load: ${e.message}`));
  }
}

// resync reloads what the page shows from the API: after a reconnect whose
// replay could not be complete (the log was pruned meanwhile).
async function resync() {
  try { await loadPermissions(); } catch { /* shown on the next reconnect */ }
  await route();
}

async function start() {
  const conn = document.getElementById("conn");
  let droppedAt = null;
  const stream = new EventStream("/event", {
    onEvent: (ev) => {
      if (ev.seq !== undefined) conn.dataset.seq = String(ev.seq);
      if (ev.type === "server.gap") {
        notice(`Some events were pruned from the log before they could be replayed (after seq ${ev.properties?.after}); the page was reloaded from the API.`);
        resync();
        return;
      }
      onEvent(ev);
    },
    onState: (s, info) => {
      conn.dataset.state = s;
      if (s === "live") {
        conn.textContent = "live";
      } else {
        droppedAt ??= Date.now();
        conn.textContent = `reconnecting (attempt ${info.attempt})…`;
      }
    },
    onCaughtUp: (missed, before) => {
      const away = droppedAt ? fmtDuration(Date.now() - droppedAt) : "";
      droppedAt = null;
      const range = missed.length ? ` (seq ${missed[0].seq}–${missed[missed.length - 1].seq})` : "";
      notice(`Reconnected after ${away}: caught up on ${missed.length} event${missed.length === 1 ? "" : "s"} missed since seq ${before}${range}.`);
      document.getElementById("notice").dataset.missed = String(missed.length);
      // The replay carried every durable change, so the views are already
      // right; the events view marks the rows that came late.
      if (state.view instanceof EventsView) state.view.markMissed(missed);
    },
  });
  stream.start();
  loadPermissions().catch(() => {}).finally(() => { state.view?.changed?.(); updateNeedsMe(); });
  window.addEventListener("hashchange", route);
  api("GET", "/config").then((c) => { state.defaultModel = c?.model || ""; state.view?.changed?.(); }).catch(() => {});
  await route();
  // Only the first view may draw from what the page carried.
  document.getElementById("initial")?.remove();
}

// Awaited at the top level: the page's load event waits for the first view
// to be drawn, so a headless screenshot (or any tool that waits for load)
// shows the sessions, not "Loading…".
await start();
