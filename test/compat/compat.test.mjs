// Compatibility test: drives a fresh agentd through the real opencode SDK
// (@opencode-ai/sdk, pinned in package.json) and checks the shapes the
// SDK's types promise. Run with: node --test (AGENTD_BIN may name a built
// binary; otherwise the script builds one with go build).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createOpencodeClient } from "@opencode-ai/sdk";
import { createOpencodeClient as createV2 } from "@opencode-ai/sdk/v2";
import { startAgentd } from "./harness.mjs";

let baseUrl, dir, client, v2, stop;

before(async () => {
  // A custom command and an MCP server that cannot start, for the
  // command and MCP routes.
  ({ baseUrl, dir, stop } = await startAgentd([], (d) => {
    const config = join(d, "agentd.json");
    writeFileSync(config, JSON.stringify({
      command: { greet: { template: "reply:hello $ARGUMENTS", description: "Greets" } },
      mcp: { missing: { type: "local", command: [join(d, "no-such-mcp-server")], timeout: 2000 } },
    }));
    return ["--config", config];
  }));
  client = createOpencodeClient({ baseUrl });
  v2 = createV2({ baseUrl });
});

after(() => stop?.());

const idRe = (p) => new RegExp(`^${p}_[0-9a-f]{12}[0-9A-Za-z]{14}$`);

function checkSession(s) {
  assert.match(s.id, idRe("ses"));
  assert.equal(typeof s.projectID, "string");
  assert.equal(typeof s.directory, "string");
  assert.equal(typeof s.title, "string");
  assert.equal(typeof s.version, "string");
  assert.equal(typeof s.time.created, "number");
  assert.ok(s.time.created > 1e12, "time.created is epoch milliseconds");
  assert.ok(s.time.updated >= s.time.created);
}

test("health", async () => {
  const r = await fetch(baseUrl + "/global/health");
  const h = await r.json();
  assert.equal(h.healthy, true);
  assert.equal(typeof h.version, "string");
});

test("session create, list, get, update, delete", async () => {
  const created = await client.session.create({ body: { title: "compat" } });
  assert.equal(created.error, undefined);
  const s = created.data;
  checkSession(s);
  assert.equal(s.title, "compat");

  const other = (await v2.session.create({ title: "second" })).data;
  checkSession(other);

  const list = (await client.session.list()).data;
  assert.ok(Array.isArray(list));
  const ids = list.map((x) => x.id);
  assert.ok(ids.includes(s.id) && ids.includes(other.id));
  assert.ok(ids.indexOf(other.id) < ids.indexOf(s.id), "newest updated first");

  const got = (await client.session.get({ path: { id: s.id } })).data;
  assert.deepEqual(got, s);
  const got2 = (await v2.session.get({ sessionID: s.id })).data;
  assert.equal(got2.id, s.id);

  const upd = (await client.session.update({ path: { id: s.id }, body: { title: "renamed" } })).data;
  assert.equal(upd.title, "renamed");
  assert.ok(upd.time.updated >= s.time.updated);

  const missing = await client.session.get({ path: { id: "ses_doesnotexist" } });
  assert.equal(missing.response.status, 404);
  assert.equal(missing.error.name, "NotFoundError");
  assert.equal(typeof missing.error.data.message, "string");

  const del = await client.session.delete({ path: { id: other.id } });
  assert.equal(del.data, true);
  const gone = await client.session.get({ path: { id: other.id } });
  assert.equal(gone.response.status, 404);
});

test("status: idle for an existing session, 404 for an unknown one", async () => {
  const s = (await client.session.create({ body: {} })).data;
  const all = (await client.session.status()).data;
  assert.equal(typeof all, "object");
  assert.equal(all[s.id], undefined, "an idle session is absent from the map");
  const one = await fetch(`${baseUrl}/session/${s.id}/status`).then((r) => r.json());
  assert.equal(one.type, "idle");
  const unknown = await fetch(`${baseUrl}/session/ses_unknown/status`);
  assert.equal(unknown.status, 404);
});

test("prompt, promptAsync, abort and one idle per run on the event stream", async () => {
  const s = (await client.session.create({ body: {} })).data;
  const events = await client.event.subscribe();
  const seen = [];
  const reader = (async () => {
    for await (const ev of events.stream) {
      assert.match(ev.id, /^evt_/);
      if (ev.properties?.sessionID === s.id || ev.properties?.run?.sessionID === s.id) seen.push(ev);
      if (ev.type === "session.idle" && ev.properties.sessionID === s.id && seen.filter((e) => e.type === "session.idle").length >= 2) break;
    }
  })();

  const res = await client.session.prompt({ path: { id: s.id }, body: { parts: [{ type: "text", text: "reply:hello from agentd" }] } });
  assert.equal(res.error, undefined);
  const { info, parts } = res.data;
  assert.equal(info.role, "assistant");
  assert.match(info.id, idRe("msg"));
  assert.equal(typeof info.tokens.cache.read, "number");
  assert.equal(typeof info.cost, "number");
  assert.ok(info.time.completed >= info.time.created);
  const text = parts.filter((p) => p.type === "text").map((p) => p.text).join("");
  assert.equal(text, "hello from agentd");
  assert.ok(parts.some((p) => p.type === "step-finish"));
  // The run's end travels as an empty synthetic text part (opencode's
  // schema has no idle part type) with the outcome in its metadata.
  const idle = parts.find((p) => p.metadata?.agentd?.type === "idle");
  assert.equal(idle.type, "text");
  assert.equal(idle.text, "");
  assert.equal(idle.metadata.agentd.outcome, "succeeded");

  const async = await client.session.promptAsync({ path: { id: s.id }, body: { parts: [{ type: "text", text: "sleep:30" }] } });
  assert.equal(async.response.status, 204);
  const busy = (await client.session.status()).data;
  assert.equal(busy[s.id].type, "busy");
  const aborted = await client.session.abort({ path: { id: s.id } });
  assert.equal(aborted.data, true);
  const after = await fetch(`${baseUrl}/session/${s.id}/status`).then((r) => r.json());
  assert.equal(after.type, "idle");
  assert.equal(after.last.outcome, "interrupted");
  assert.equal(after.last.reason, "aborted");

  await reader;
  const idles = seen.filter((e) => e.type === "session.idle");
  assert.equal(idles.length, 2, "exactly one session.idle per run");
  assert.deepEqual(Object.keys(idles[0].properties), ["sessionID"]);
  // The outcome is in agentd's run.updated, written just before.
  const ends = seen.filter((e) => e.type === "run.updated" && ["succeeded", "failed", "interrupted"].includes(e.properties.run.state));
  assert.deepEqual(ends.map((e) => e.properties.run.state), ["succeeded", "interrupted"]);
  assert.notEqual(ends[0].properties.run.id, ends[1].properties.run.id);
  for (const [i, idle] of idles.entries()) {
    assert.ok(seen.indexOf(ends[i]) < seen.indexOf(idle), "the run's end precedes its session.idle");
  }

  const msgs = (await client.session.messages({ path: { id: s.id } })).data;
  assert.equal(msgs[0].info.role, "user");
  assert.equal(msgs[0].parts[0].text, "reply:hello from agentd");
});

test("subagents: the task tool's child session is read through session.children", async () => {
  const s = (await client.session.create({ body: {} })).data;
  const task = JSON.stringify({ description: "ask", prompt: "reply:from the child", subagent_type: "general" });
  const res = await client.session.prompt({ path: { id: s.id }, body: { parts: [{ type: "text", text: `tool:task:${task}\nreply:done` }] } });
  assert.equal(res.error, undefined);
  const kids = (await client.session.children({ path: { id: s.id } })).data;
  assert.equal(kids.length, 1);
  checkSession(kids[0]);
  assert.equal(kids[0].parentID, s.id);
  const msgs = (await client.session.messages({ path: { id: kids[0].id } })).data;
  assert.ok(msgs.some((m) => m.parts.some((p) => p.type === "text" && p.text === "from the child")));
});

test("todos: todowrite's list is read through session.todo", async () => {
  const s = (await client.session.create({ body: {} })).data;
  assert.deepEqual((await client.session.todo({ path: { id: s.id } })).data, []);
  const todos = JSON.stringify({ todos: [{ content: "check the SDK", status: "in_progress", priority: "high" }] });
  const res = await client.session.prompt({ path: { id: s.id }, body: { parts: [{ type: "text", text: `tool:todowrite:${todos}\nreply:ok` }] } });
  assert.equal(res.error, undefined);
  const got = (await client.session.todo({ path: { id: s.id } })).data;
  assert.deepEqual(got, [{ content: "check the SDK", status: "in_progress", priority: "high" }]);
});

test("commands: command.list and session.command", async () => {
  const list = (await client.command.list()).data;
  const greet = list.find((c) => c.name === "greet");
  assert.ok(greet, "the configured command is listed");
  assert.equal(greet.template, "reply:hello $ARGUMENTS");
  assert.deepEqual(greet.hints, ["$ARGUMENTS"]);
  const s = (await client.session.create({ body: {} })).data;
  const res = await client.session.command({ path: { id: s.id }, body: { command: "greet", arguments: "sdk" } });
  assert.equal(res.error, undefined);
  assert.equal(res.data.info.role, "assistant");
  assert.ok(res.data.parts.some((p) => p.type === "text" && p.text === "hello sdk"));
});

test("MCP: mcp.status reports each configured server", async () => {
  const st = (await client.mcp.status()).data;
  assert.equal(st.missing.status, "failed");
  assert.equal(typeof st.missing.error, "string");
});

// The usual SDK v2 set-up: a client bound to a project directory. A full
// flow through it: a session in that directory, a bash call the client
// approves (its running part, with the command, comes before the ask), a
// structured answer, file search and reads, diff, undo and redo, fork,
// the user's own shell command, and questions.
test("SDK v2 with a directory: approval, structured output, files, undo, fork, shell", async () => {
  const project = realpathSync(mkdtempSync(join(tmpdir(), "agentd-compat-project ")));
  writeFileSync(join(project, "hello.txt"), "hello\n");
  const c = createV2({ baseUrl, directory: project });
  const s = (await c.session.create({ title: "in a project" })).data;
  checkSession(s);
  assert.equal(s.directory, project);

  // A bash call: the client sees the call running with its command, then
  // the ask, and answers it.
  const events = await c.event.subscribe();
  const seen = [];
  let askID;
  const done = (async () => {
    for await (const ev of events.stream) {
      if (ev.properties?.sessionID !== s.id && ev.properties?.part?.sessionID !== s.id) continue;
      seen.push(ev);
      if (ev.type === "permission.asked") {
        askID = ev.properties.id;
        await c.permission.reply({ requestID: ev.properties.id, reply: "once" });
      }
      if (ev.type === "session.idle") break;
    }
  })();
  const cmd = JSON.stringify({ command: "echo changed > hello.txt; echo approved" });
  assert.equal((await c.session.promptAsync({ sessionID: s.id, parts: [{ type: "text", text: `tool:bash:${cmd}\nreply:done` }] })).error, undefined);
  await done;
  assert.ok(askID, "the bash call asked");
  const asked = seen.findIndex((e) => e.type === "permission.asked");
  const running = seen.findIndex((e) => e.type === "message.part.updated" && e.properties.part.type === "tool" &&
    e.properties.part.state.status === "running" && e.properties.part.state.input.command);
  assert.ok(running >= 0 && running < asked, "the call is shown running, with its command, before the ask");
  const completed = seen.find((e) => e.type === "message.part.updated" && e.properties.part.type === "tool" && e.properties.part.state.status === "completed");
  assert.match(completed.properties.part.state.metadata.output, /approved/);
  assert.equal(readFileSync(join(project, "hello.txt"), "utf8"), "changed\n");

  // Structured output.
  const schema = { type: "object", properties: { answer: { type: "string" } }, required: ["answer"] };
  const structured = await c.session.prompt({ sessionID: s.id, format: { type: "json_schema", schema },
    parts: [{ type: "text", text: 'tool:StructuredOutput:{"answer":"yes"}' }] });
  assert.equal(structured.error, undefined);
  assert.deepEqual(structured.data.info.structured, { answer: "yes" });

  // Files.
  assert.ok((await c.find.files({ query: "hel" })).data.includes("hello.txt"));
  assert.equal((await c.file.read({ path: "hello.txt" })).data.content, "changed");
  assert.ok((await c.find.text({ pattern: "changed" })).data.some((m) => m.path.text === "hello.txt"));

  // Diff, undo, redo.
  const diff = (await c.session.diff({ sessionID: s.id })).data;
  assert.ok(diff.some((d) => d.file === "hello.txt" && d.additions === 1));
  const msgs = (await c.session.messages({ sessionID: s.id })).data;
  const first = msgs.find((m) => m.info.role === "user");
  const reverted = (await c.session.revert({ sessionID: s.id, messageID: first.info.id })).data;
  assert.equal(reverted.revert.messageID, first.info.id);
  assert.equal(readFileSync(join(project, "hello.txt"), "utf8"), "hello\n");
  assert.equal((await c.session.unrevert({ sessionID: s.id })).data.revert, undefined);
  assert.equal(readFileSync(join(project, "hello.txt"), "utf8"), "changed\n");

  // Fork, shell, questions.
  const fork = (await c.session.fork({ sessionID: s.id })).data;
  checkSession(fork);
  assert.notEqual(fork.id, s.id);
  assert.equal((await c.session.messages({ sessionID: fork.id })).data.length, msgs.length);
  const shell = await c.session.shell({ sessionID: s.id, agent: "build", command: "echo from-the-shell" });
  assert.equal(shell.error, undefined);
  assert.ok(shell.data.parts.some((p) => p.type === "tool" && /from-the-shell/.test(p.state.output)));
  assert.deepEqual((await c.question.list()).data, []);
});
