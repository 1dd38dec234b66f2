// The test plugin: uses every hook agentd calls, each with an effect a
// test can see. Its options name the file it writes what it saw to.
import fs from "node:fs"
import { tool } from "@opencode-ai/plugin"

export const EveryHook = async (input, options) => {
  const log = (what) => fs.appendFileSync(options.log, JSON.stringify(what) + "\n")
  log({ init: input.directory, worktree: input.worktree, project: input.project?.id, server: String(input.serverUrl) })
  return {
    config: async (cfg) => log({ config: cfg.model }),
    event: async ({ event }) => log({ event: event.type, id: event.id, title: event.properties?.info?.title }),
    "chat.message": async (inp, out) => {
      if (!out.parts.some((p) => p.type === "text" && p.text.includes("[note]"))) return
      out.parts.push({ type: "text", text: "a note the plugin added", synthetic: true })
      // The routes plugins call through their client: a toast and a log line.
      const toast = await input.client.tui.showToast({ body: { message: "from the plugin", variant: "info" } })
      const logged = await input.client.app.log({ body: { service: "everyhook", level: "info", message: "from the plugin" } })
      log({ toast: toast.data ?? String(toast.error), logged: logged.data ?? String(logged.error) })
    },
    "command.execute.before": async (inp, out) => {
      if (inp.command === "failcmd") throw new Error("command refused by the plugin")
      if (inp.command === "plugcmd") out.parts.push({ type: "text", text: "added by the command hook: " + inp.arguments })
    },
    "experimental.chat.messages.transform": async (inp, out) => {
      for (const m of out.messages)
        for (const p of m.parts)
          if (p.type === "tool" && p.state?.status === "completed" && p.state.output.includes("PRUNE-ME"))
            p.state.output = "[pruned by the plugin]"
    },
    "experimental.session.compacting": async (inp, out) => {
      out.context.push("CONTEXT FROM THE COMPACTING HOOK " + inp.sessionID)
    },
    "chat.params": async (inp, out) => {
      out.temperature = 0.42
      out.topK = 7
      out.options.reasoningEffort = "low"
    },
    "chat.headers": async (inp, out) => {
      out.headers["x-plugin-header"] = "from-plugin " + inp.sessionID
    },
    "experimental.chat.system.transform": async (inp, out) => {
      out.system.push("SYSTEM LINE FROM THE PLUGIN")
    },
    "tool.definition": async (inp, out) => {
      if (inp.toolID === "echo") out.description += " [defined by the plugin]"
    },
    "tool.execute.before": async (inp, out) => {
      if (inp.tool === "echo") out.args.text = out.args.text + " (before)"
      if (inp.tool === "count") await new Promise(() => {}) // stuck: never answers
    },
    "tool.execute.after": async (inp, out) => {
      if (inp.tool !== "echo") return
      out.output = out.output + " (after)"
      out.title = "title from the plugin"
      out.metadata = { ...out.metadata, plugin: true }
    },
    "shell.env": async (inp, out) => {
      out.env.PLUGIN_SHELL_VAR = "set-by-plugin"
    },
    "permission.ask": async (inp, out) => {
      if ((inp.patterns ?? []).some((p) => p.includes("ask-me"))) out.status = "ask"
    },
    dispose: async () => log({ disposed: true }),
    tool: {
      plugin_add: tool({
        description: "Add two numbers (a plugin's tool).",
        args: { a: tool.schema.number(), b: tool.schema.number() },
        async execute(args, ctx) {
          ctx.metadata({ title: "adding", metadata: { partial: true } })
          if (args.a < 0) await ctx.ask({ permission: "plugin_add", patterns: [String(args.a)], always: ["*"], metadata: {} })
          return { title: "sum", output: String(args.a + args.b), metadata: { session: ctx.sessionID, agent: ctx.agent } }
        },
      }),
      plugin_crash: tool({
        description: "Kill the plugin host.",
        args: {},
        async execute() {
          setTimeout(() => process.exit(3), 10)
          return await new Promise(() => {})
        },
      }),
    },
  }
}
