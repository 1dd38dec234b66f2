// The benchmark's plugin: a before and an after hook on every tool call,
// each changing a little, as a logging or redaction plugin would.
export const TwoHooks = async () => ({
  "tool.execute.before": async (input, output) => {
    output.args.seen = true
  },
  "tool.execute.after": async (input, output) => {
    output.metadata = { ...output.metadata, checked: true }
  },
})
