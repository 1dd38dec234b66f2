// Terminals through opencode's SDK, the way opencode's web app uses them
// (packages/app, its terminal panel): create, size, a connect ticket asked
// for with the header the app sends, the websocket with directory, cursor
// and ticket, the cursor frame, typing, a reconnect from the counted
// cursor, removal. The websocket needs a global WebSocket (Node 22, or
// Node 20 with --experimental-websocket); without one that part skips.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createOpencodeClient } from "@opencode-ai/sdk/v2";
import { startAgentd } from "./harness.mjs";

let baseUrl, dir, client, stop;

before(async () => {
  ({ baseUrl, dir, stop } = await startAgentd([], (d) => {
    const config = join(d, "agentd.json");
    writeFileSync(config, JSON.stringify({ agentd: { terminal: { enabled: true } } }));
    return ["--config", config];
  }));
  client = createOpencodeClient({ baseUrl, directory: dir });
});

after(() => stop?.());

// connect opens the terminal's websocket as the app does and collects
// what it receives; cursor is the app's count (cursor frame, then the
// UTF-16 length of each text frame).
function connect(id, ticket, seek) {
  const url = new URL(baseUrl + `/pty/${id}/connect`);
  url.searchParams.set("directory", dir);
  url.searchParams.set("cursor", String(seek));
  url.searchParams.set("ticket", ticket);
  url.protocol = "ws:";
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  const state = { ws, text: "", cursor: 0, metas: [], closed: null };
  const waiters = [];
  const wake = () => waiters.splice(0).forEach((f) => f());
  ws.addEventListener("message", (ev) => {
    if (ev.data instanceof ArrayBuffer) {
      const bytes = new Uint8Array(ev.data);
      assert.equal(bytes[0], 0, "a binary frame is a control frame");
      const meta = JSON.parse(new TextDecoder().decode(bytes.subarray(1)));
      state.metas.push(meta.cursor);
      state.cursor = meta.cursor;
    } else {
      state.text += ev.data;
      state.cursor += ev.data.length;
    }
    wake();
  });
  ws.addEventListener("close", (ev) => {
    state.closed = ev.code;
    wake();
  });
  state.opened = new Promise((resolve, reject) => {
    ws.addEventListener("open", resolve);
    ws.addEventListener("error", reject);
  });
  state.until = async (pred, what) => {
    const deadline = Date.now() + 15000;
    while (!pred(state)) {
      if (state.closed !== null) throw new Error(`closed (${state.closed}) before ${what}: ${JSON.stringify(state.text)}`);
      if (Date.now() > deadline) throw new Error(`no ${what}: ${JSON.stringify(state.text)}`);
      await new Promise((r) => { waiters.push(r); setTimeout(r, 200); });
    }
  };
  return state;
}

async function ticket(id) {
  const r = await client.pty.connectToken({ ptyID: id, directory: dir }, { headers: { "x-opencode-ticket": "1" } });
  assert.equal(r.error, undefined, JSON.stringify(r.error));
  assert.equal(typeof r.data.ticket, "string");
  assert.equal(r.data.expires_in, 60);
  return r.data.ticket;
}

test("terminal: create, list, size, type over the websocket, reconnect, remove", async (t) => {
  const created = await client.pty.create({ command: "/bin/bash", args: ["--norc", "--noprofile", "-i"], env: { PS1: "$ " }, title: "compat" });
  assert.equal(created.error, undefined, JSON.stringify(created.error));
  const pty = created.data;
  assert.match(pty.id, /^pty_/);
  assert.equal(pty.status, "running");
  assert.equal(pty.title, "compat");
  assert.ok(pty.pid > 0);

  const list = (await client.pty.list({ directory: dir })).data;
  assert.ok(list.some((p) => p.id === pty.id));
  const sized = await client.pty.update({ ptyID: pty.id, size: { cols: 100, rows: 30 } });
  assert.equal(sized.error, undefined);

  const noHeader = await client.pty.connectToken({ ptyID: pty.id });
  assert.equal(noHeader.response.status, 403);

  if (typeof WebSocket === "undefined") {
    t.skip("no global WebSocket in this Node (use Node 22, or --experimental-websocket)");
  } else {
    const first = connect(pty.id, await ticket(pty.id), 0);
    await first.opened;
    await first.until((s) => s.metas.length > 0, "the cursor frame");
    first.ws.send("stty size; echo é-😀-$((6*7))\n");
    await first.until((s) => s.text.includes("é-😀-42\r\n"), "the command's output");
    assert.ok(first.text.includes("30 100"), "the size reached the terminal");
    const cursor = first.cursor;
    first.ws.close(1000);

    await client.pty.update({ ptyID: pty.id, title: "renamed" });
    // A reconnect from the cursor the app counted gets nothing it had.
    const again = connect(pty.id, await ticket(pty.id), cursor);
    await again.opened;
    again.ws.send("echo after-$((1+1))\n");
    await again.until((s) => s.text.includes("after-2\r\n"), "the output after the reconnect");
    assert.ok(!again.text.includes("42"), "the reconnect replayed what the client had");
    again.ws.close(1000);

    const spent = connect(pty.id, "not-a-ticket", -1);
    await assert.rejects(spent.opened);
  }

  const removed = await client.pty.remove({ ptyID: pty.id });
  assert.equal(removed.data, true);
  const gone = await client.pty.get({ ptyID: pty.id });
  assert.equal(gone.response.status, 404);
});
