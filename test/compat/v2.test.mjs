// opencode 2's API through the SDK's own v2 client (@opencode-ai/sdk/v2,
// its `v2` group): a client's whole flow against a fresh agentd — create,
// prompt, watch the session's events, wait, read the transcript with the
// run's idle entry and the history with its execution events, interrupt,
// revert. Run with: node --test (see harness.mjs).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createOpencodeClient } from "@opencode-ai/sdk/v2";
import { startAgentd } from "./harness.mjs";

let stop, api;

before(async () => {
  let baseUrl;
  ({ baseUrl, stop } = await startAgentd());
  api = createOpencodeClient({ baseUrl }).v2;
});

after(() => stop?.());

// ok unwraps an SDK answer, failing on an error.
function ok(r) {
  assert.equal(r.error, undefined, JSON.stringify(r.error));
  return r.data;
}

test("an opencode 2 client's session", async () => {
  const sid = ok(await api.session.create({})).data.id;
  assert.match(sid, /^ses_/);

  // Watch the session's durable events from its start.
  const ac = new AbortController();
  const sub = await api.session.events({ sessionID: sid, after: "0" }, { signal: ac.signal });
  const seen = [];
  const watching = (async () => {
    for await (const ev of sub.stream) {
      seen.push(ev);
      if (ev.type === "session.execution.succeeded") break;
    }
  })();

  const admitted = ok(await api.session.prompt({ sessionID: sid, prompt: { text: "reply:hello from the sdk" } })).data;
  assert.match(admitted.id, /^msg_/);
  assert.ok(admitted.admittedSeq > 0);
  ok(await api.session.wait({ sessionID: sid }));
  await watching;
  ac.abort();
  const types = seen.map((e) => e.type);
  for (const t of ["session.next.prompted", "session.execution.started", "session.next.text.ended", "session.execution.succeeded"]) {
    assert.ok(types.includes(t), `${t} in ${types}`);
  }

  const info = ok(await api.session.get({ sessionID: sid })).data;
  assert.equal(info.outcome, "succeeded");
  assert.ok(info.time.idle >= info.time.created);

  const list = ok(await api.session.messages({ sessionID: sid, order: "asc" })).data;
  assert.deepEqual(list.map((m) => m.type), ["user", "assistant", "idle"]);
  assert.equal(list[2].outcome, "succeeded");
  assert.equal(list[1].content.find((c) => c.type === "text").text, "hello from the sdk");

  const history = ok(await api.session.history({ sessionID: sid })).data;
  assert.equal(history.filter((e) => e.type === "session.execution.succeeded").length, 1);

  // Interrupt a long run.
  await api.session.prompt({ sessionID: sid, prompt: { text: "sleep:60" } });
  for (let i = 0; i < 500 && !ok(await api.session.active()).data[sid]; i++) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(ok(await api.session.interrupt({ sessionID: sid })), { interrupted: true });
  ok(await api.session.wait({ sessionID: sid }));
  assert.equal(ok(await api.session.active()).data[sid], undefined);
  const ended = ok(await api.session.history({ sessionID: sid })).data.filter((e) => e.type === "session.execution.interrupted");
  assert.equal(ended.length, 1);
  assert.equal(ended[0].data.reason, "user");

  // Revert the first turn, bring it back, revert it for good.
  const staged = ok(await api.session.revert.stage({ sessionID: sid, messageID: admitted.id })).data;
  assert.equal(staged.messageID, admitted.id);
  ok(await api.session.revert.clear({ sessionID: sid }));
  ok(await api.session.revert.stage({ sessionID: sid, messageID: admitted.id }));
  ok(await api.session.revert.commit({ sessionID: sid }));
  assert.deepEqual(ok(await api.session.messages({ sessionID: sid })).data, []);

  // Unknown is not idle.
  const unknown = await api.session.get({ sessionID: "ses_doesnotexist" });
  assert.equal(unknown.response.status, 404);
  assert.equal(unknown.error._tag, "SessionNotFoundError");
});
