// A benchmark plugin: its event hook counts the events it gets, and
// nothing more.
let events = 0

export const CountEvents = async () => ({
  event: async () => {
    events++
  },
})
