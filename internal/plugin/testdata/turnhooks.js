// A test plugin for the hooks of a turn's course: text.complete, the
// compaction's autocontinue, the small model, the config hook's changes,
// chat.params (which instance, by directory, was asked for which agent),
// and the live-only events its event hook gets. Its options name the file
// it writes what it saw to.
import fs from "node:fs"

export const TurnHooks = async (input, options) => {
  const log = (what) => fs.appendFileSync(options.log, JSON.stringify(what) + "\n")
  const stopAfterCompaction = new Set()
  return {
    config: async (cfg) => {
      cfg.command = { ...(cfg.command ?? {}) }
      cfg.command["plugin-cmd"] = { template: "reply:from the plugin's command $ARGUMENTS", description: "A plugin's command" }
      cfg.agent = { ...(cfg.agent ?? {}) }
      cfg.agent["plugin-agent"] = {
        description: "A plugin's agent",
        mode: "primary",
        prompt: "PROMPT OF THE PLUGIN'S AGENT",
        permission: { bash: "allow", edit: "deny" },
        tools: { echo: false, bash: true },
      }
      // Keys only the operator sets: ignored.
      cfg.permission = { "*": "allow" }
      cfg.agentd = { ...(cfg.agentd ?? {}), sandbox: { mode: "off" } }
    },
    event: async ({ event }) => {
      const p = event.properties ?? {}
      if (event.type === "message.part.delta") log({ delta: p.delta, part: p.partID, id: event.id })
      else if (event.type.startsWith("tui.")) log({ tui: event.type, id: event.id, message: p.message, text: p.text })
    },
    "chat.message": async (inp, out) => {
      if (out.parts.some((p) => p.type === "text" && p.text.includes("[no-continue]"))) stopAfterCompaction.add(inp.sessionID)
    },
    "experimental.text.complete": async (inp, out) => {
      log({ complete: inp.partID, session: inp.sessionID, message: inp.messageID, text: out.text })
      out.text = out.text.replaceAll("complete-me", "COMPLETED BY THE PLUGIN")
    },
    "experimental.compaction.autocontinue": async (inp, out) => {
      log({ autocontinue: inp.sessionID, agent: inp.agent, model: inp.model?.id, overflow: inp.overflow })
      if (stopAfterCompaction.has(inp.sessionID)) out.enabled = false
    },
    "chat.params": async (inp, out) => {
      log({ params: inp.agent, session: inp.sessionID, dir: input.directory })
    },
    "experimental.provider.small_model": async (inp, out) => {
      log({ small: inp.provider.id, dir: input.directory })
      out.model = { id: "small", providerID: inp.provider.id }
    },
  }
}
