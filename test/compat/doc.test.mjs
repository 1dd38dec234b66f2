// agentd's /doc generates a working typed client: openapi-typescript
// turns it into TypeScript types, a program using them through
// openapi-fetch type-checks under tsc --strict, and the same calls run
// against a live agentd.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";
import createClient from "openapi-fetch";
import { startAgentd } from "./harness.mjs";

const here = dirname(fileURLToPath(import.meta.url));
let baseUrl, dir, stop;

before(async () => {
  ({ baseUrl, dir, stop } = await startAgentd());
});

after(() => stop?.());

test("/doc generates types a strict TypeScript program compiles against", async () => {
  const doc = await (await fetch(baseUrl + "/doc")).json();
  const types = astToString(await openapiTS(doc));
  const gen = join(dir, "gen");
  mkdirSync(gen);
  writeFileSync(join(gen, "agentd.d.ts"), types);
  // A program a client author would write: wrong paths, parameters or
  // field names fail to compile.
  writeFileSync(join(gen, "use.ts"), `
import createClient from "openapi-fetch";
import type { paths } from "./agentd";
export async function use(baseUrl: string): Promise<string> {
  const c = createClient<paths>({ baseUrl });
  const s = await c.POST("/session", { body: { title: "typed" } });
  if (!s.data) throw new Error("no session");
  const id: string = s.data.id;
  const sent = await c.POST("/session/{sessionID}/message", {
    params: { path: { sessionID: id } },
    body: { parts: [{ type: "text", text: "reply:typed hello" }] },
  });
  const parts = sent.data?.parts ?? [];
  const st = await c.GET("/session/{sessionID}/status", { params: { path: { sessionID: id } } });
  const kind: string = st.data?.type ?? "";
  const runs = await c.GET("/session/{sessionID}/run", { params: { path: { sessionID: id }, query: { limit: 5 } } });
  const outcome: string = runs.data?.[0]?.state ?? "";
  return [kind, outcome, parts.length].join(" ");
}
`);
  writeFileSync(join(gen, "tsconfig.json"), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, target: "es2022", module: "nodenext", moduleResolution: "nodenext",
      typeRoots: [], types: [], baseUrl: here, paths: { "openapi-fetch": [join(here, "node_modules/openapi-fetch")] } },
    files: ["use.ts"],
  }));
  const tsc = join(here, "node_modules", "typescript", "bin", "tsc");
  try {
    execFileSync(process.execPath, [tsc, "-p", join(gen, "tsconfig.json")], { stdio: "pipe" });
  } catch (e) {
    assert.fail("tsc: " + e.stdout?.toString() + e.stderr?.toString());
  }
});

test("the generated client's calls work against agentd", async () => {
  const c = createClient({ baseUrl });
  const s = await c.POST("/session", { body: { title: "typed" } });
  assert.equal(s.response.status, 200);
  const id = s.data.id;
  const sent = await c.POST("/session/{sessionID}/message", {
    params: { path: { sessionID: id } },
    body: { parts: [{ type: "text", text: "reply:typed hello" }] },
  });
  assert.ok(sent.data.parts.some((p) => p.type === "text" && p.text === "typed hello"));
  const st = await c.GET("/session/{sessionID}/status", { params: { path: { sessionID: id } } });
  assert.equal(st.data.type, "idle");
  assert.equal(st.data.last.outcome, "succeeded");
  const missing = await c.GET("/session/{sessionID}", { params: { path: { sessionID: "ses_nope" } } });
  assert.equal(missing.response.status, 404);
  assert.equal(missing.error.name, "NotFoundError");
});
