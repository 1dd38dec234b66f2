// Starts agentd for a compatibility test: a fresh database and directory,
// the binary from AGENTD_BIN or built with go build.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

// startAgentd serves agentd on a free port in a new directory and returns
// its URL, the directory and a stop function. extraArgs go to serve.
export async function startAgentd(extraArgs = [], prepare = () => {}) {
  const dir = mkdtempSync(join(tmpdir(), "agentd-compat-"));
  let bin = process.env.AGENTD_BIN;
  if (!bin) {
    bin = join(dir, "agentd");
    execFileSync("go", ["build", "-o", bin, "./cmd/agentd"], { cwd: root, stdio: "inherit" });
  }
  const args = prepare(dir) ?? [];
  const proc = spawn(bin, ["serve", "--port", "0", "--db", join(dir, "agentd.db"), ...args, ...extraArgs],
    { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
  const baseUrl = await new Promise((resolve, reject) => {
    let buf = "";
    const timer = setTimeout(() => reject(new Error("agentd did not start: " + buf)), 20000);
    const onData = (d) => {
      buf += d.toString();
      const m = buf.match(/url=(http:\/\/[^\s]+)/);
      if (m) {
        clearTimeout(timer);
        // Keep draining the log (one line per request) without keeping it.
        proc.stderr.off("data", onData);
        proc.stderr.resume();
        resolve(m[1]);
      }
    };
    proc.stderr.on("data", onData);
    proc.on("exit", (code) => reject(new Error(`agentd exited ${code}: ${buf}`)));
  });
  const stop = () => {
    proc.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  };
  return { baseUrl, dir, stop };
}
