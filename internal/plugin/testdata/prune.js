// A context-pruning plugin, as @tarquinen/opencode-dcp is one: tool
// outputs holding PRUNE-ME are replaced, and a prompt saying DROP-ME is
// taken out of what the model sees.
export const Prune = async () => ({
  "experimental.chat.messages.transform": async (input, output) => {
    for (const m of output.messages)
      for (const p of m.parts)
        if (p.type === "tool" && p.state?.status === "completed" && p.state.output.includes("PRUNE-ME"))
          p.state.output = "[pruned]"
    output.messages = output.messages.filter((m) => !m.parts.some((p) => p.type === "text" && p.text === "DROP-ME"))
  },
})
