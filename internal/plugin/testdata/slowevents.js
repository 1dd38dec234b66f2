// A test plugin slower than the events: its event hook holds the host's
// only thread for 20 ms at each streamed delta. Its options name the file
// it writes the deltas it saw to.
import fs from "node:fs"

export const SlowEvents = async (input, options) => ({
  event: async ({ event }) => {
    if (event.type !== "message.part.delta") return
    const until = Date.now() + 20
    while (Date.now() < until) {}
    fs.appendFileSync(options.log, JSON.stringify({ delta: event.properties.delta, id: event.id }) + "\n")
  },
})
