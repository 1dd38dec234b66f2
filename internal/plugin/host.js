// agentd's plugin host: runs opencode plugins (the V1 API of
// @opencode-ai/plugin) for one agentd node. agentd starts it with Bun,
// writes requests to fd 3 and reads answers from fd 4, one JSON object a
// line; the plugins' own output (console, process.stdout) goes to the
// server's log and cannot break the protocol.
//
// agentd writes this file beside its database at each start; editing it
// there changes nothing.
import fs from "node:fs"
import { pathToFileURL } from "node:url"

const OUT = 4
const send = (msg) => fs.writeSync(OUT, JSON.stringify(msg) + "\n")
console.log = console.info = console.debug = (...args) => console.error(...args)

// Modules from agentd's plugin folder, beside this file: opencode's SDK
// (the plugins' client) and zod (tools' arguments). Without them a plugin
// still loads; what needs them says so when used.
const optional = async (name) => {
  try {
    return await import(name)
  } catch {
    return undefined
  }
}
const sdk = await optional("@opencode-ai/sdk")
const zod = (await optional("zod"))?.z

let settings = { plugins: [], config: {} }
let modules = [] // {spec, options, fns}
const instances = new Map() // directory → Promise<Instance>
const sessionDirs = new Map() // session id → directory, for events
const calls = new Map() // tool call ref → AbortController
const pending = new Map() // host request id → {resolve, reject}
let nextID = 0

function request(method, params) {
  const id = "h" + ++nextID
  send({ id, method, params })
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }))
}

// pluginsOf is what a module exports as plugins, as opencode reads it: a
// V1 module ({server}) as default export, else every export, each a
// plugin function or an object with one under server.
function pluginsOf(mod, spec) {
  const d = mod.default
  if (d && typeof d === "object" && typeof d.server === "function") return [d.server]
  if (d && typeof d === "object" && typeof d.setup === "function" && "id" in d)
    throw new Error(`${spec} is an opencode 2 plugin ({id, setup}); agentd runs opencode's V1 plugins`)
  const seen = new Set()
  const out = []
  for (const value of Object.values(mod)) {
    if (seen.has(value)) continue
    seen.add(value)
    if (typeof value === "function") out.push(value)
    else if (value && typeof value === "object" && typeof value.server === "function") out.push(value.server)
    else throw new TypeError(`${spec}: plugin export is not a function`)
  }
  return out
}

async function load(list) {
  const out = []
  for (const p of list) {
    try {
      const target = p.path.startsWith("/") ? pathToFileURL(p.path).href : p.path
      const mod = await import(target)
      out.push({ spec: p.spec, options: p.options, fns: pluginsOf(mod, p.spec) })
    } catch (err) {
      out.push({ spec: p.spec, error: String(err?.stack ?? err) })
    }
  }
  return out
}

function client(serverUrl, directory, headers) {
  if (!sdk?.createOpencodeClient)
    return new Proxy(
      {},
      {
        get() {
          throw new Error("@opencode-ai/sdk is not installed in agentd's plugin folder: run agentd plugin install")
        },
      },
    )
  return sdk.createOpencodeClient({ baseUrl: serverUrl, directory, headers })
}

async function makeInstance(p) {
  const $ = new Bun.$.Shell()
  $.cwd(p.directory)
  const input = {
    client: client(p.serverUrl, p.directory, p.headers),
    project: p.project,
    directory: p.directory,
    worktree: p.worktree,
    serverUrl: new URL(p.serverUrl),
    $,
    experimental_workspace: { register() {} },
  }
  const local = p.local?.length ? await load(p.local.map((f) => ({ spec: f, path: f }))) : []
  const hooks = []
  const errors = []
  for (const m of [...modules, ...local]) {
    if (m.error) {
      errors.push({ spec: m.spec, error: m.error })
      continue
    }
    for (const fn of m.fns) {
      try {
        hooks.push((await fn(input, m.options)) ?? {})
      } catch (err) {
        errors.push({ spec: m.spec, error: String(err?.stack ?? err) })
      }
    }
  }
  const tools = new Map()
  for (const h of hooks) for (const [name, def] of Object.entries(h.tool ?? {})) tools.set(name, def)
  // Every config hook changes the same object, as in opencode; agentd
  // reads back what they changed (method config).
  const config = structuredClone(settings.config ?? {})
  for (const h of hooks) {
    try {
      await h.config?.(config)
    } catch (err) {
      errors.push({ spec: "config hook", error: String(err?.stack ?? err) })
    }
  }
  return { hooks, tools, errors, worktree: p.worktree, config, pending: 0 }
}

// made is the instance agentd made for a directory (agentd makes each
// before its first hook or tool call, and again after a restart).
function made(directory) {
  const inst = instances.get(directory)
  if (!inst) throw new Error(`no plugin instance for ${directory}`)
  return inst
}

function instance(p) {
  let made = instances.get(p.directory)
  if (!made) {
    made = makeInstance(p)
    instances.set(p.directory, made)
    made.catch(() => instances.delete(p.directory))
  }
  return made
}

function schemaOf(def) {
  const args = def.args ?? {}
  const v4 = zod && Object.values(args).every((a) => a && typeof a === "object" && "_zod" in a)
  if (v4) {
    const s = zod.toJSONSchema(zod.object(args))
    delete s.$schema
    return s
  }
  return { type: "object", properties: {}, additionalProperties: true }
}

function describe(inst) {
  const names = new Set()
  for (const h of inst.hooks) for (const [k, v] of Object.entries(h)) if (typeof v === "function") names.add(k)
  const tools = []
  for (const [name, def] of inst.tools) tools.push({ name, description: def.description ?? "", parameters: schemaOf(def) })
  return { hooks: [...names], tools, errors: inst.errors }
}

async function trigger(inst, name, input, output) {
  for (const h of inst.hooks) {
    const fn = h[name]
    if (typeof fn === "function") await fn(input, output)
  }
  return output
}

async function runTool(p) {
  const inst = await made(p.directory)
  const def = inst.tools.get(p.name)
  if (!def) throw new Error(`plugin tool ${p.name} is not defined for ${p.directory}`)
  let args = p.args ?? {}
  const v4 = zod && Object.values(def.args ?? {}).every((a) => a && typeof a === "object" && "_zod" in a)
  if (v4) {
    const parsed = zod.object(def.args ?? {}).safeParse(args)
    if (!parsed.success)
      throw new Error(`The ${p.name} tool was called with invalid arguments: ${parsed.error.message}`)
    args = parsed.data
  }
  const abort = new AbortController()
  calls.set(p.ref, abort)
  const ctx = {
    ...p.context,
    directory: p.directory,
    worktree: inst.worktree,
    abort: abort.signal,
    metadata(m) {
      send({ method: "tool.metadata", params: { ref: p.ref, title: m?.title, metadata: m?.metadata } })
    },
    ask(a) {
      return request("tool.ask", { ref: p.ref, ...a })
    },
  }
  try {
    const res = await def.execute(args, ctx)
    if (typeof res === "string") return { output: res }
    return { title: res?.title, output: String(res?.output ?? ""), metadata: res?.metadata, attachments: res?.attachments }
  } finally {
    calls.delete(p.ref)
  }
}

function deliver(event) {
  const props = event.properties ?? {}
  const info = props.info
  if (event.type?.startsWith("session.") && info?.id && info?.directory) sessionDirs.set(info.id, info.directory)
  const sid = props.sessionID ?? info?.sessionID ?? (event.type?.startsWith("session.") ? info?.id : undefined)
  const dir = sid ? sessionDirs.get(sid) : undefined
  for (const [d, made] of instances) {
    if (dir && d !== dir) continue
    made.then((inst) => callEventHooks(inst, event)).catch(() => {})
  }
}

// histories keeps each session's last history for
// experimental.chat.messages.transform, which agentd sends as a change:
// how many leading messages stay, and the rest. Each message is kept with
// its JSON, so that the answer names unchanged ones by index. The oldest
// session goes beyond 64 (agentd forgets as many).
const histories = new Map() // session id → {messages, texts}
async function transform(p) {
  const inst = await made(p.directory)
  const had = histories.get(p.sessionID)
  if (p.keep > 0 && (!had || had.messages.length < p.keep)) throw new Error("history not kept")
  const h = had ?? { messages: [], texts: [] }
  h.messages.length = h.texts.length = p.keep
  for (const m of p.add) {
    h.messages.push(m)
    h.texts.push(JSON.stringify(m))
  }
  histories.delete(p.sessionID)
  histories.set(p.sessionID, h)
  if (histories.size > 64) histories.delete(histories.keys().next().value)
  const output = { messages: structuredClone(h.messages) }
  await trigger(inst, "experimental.chat.messages.transform", {}, output)
  const index = new Map(h.texts.map((t, i) => [t, i]))
  return {
    messages: output.messages.map((m) => {
      const i = index.get(JSON.stringify(m))
      return i === undefined ? { message: m } : { same: i }
    }),
  }
}

async function dispose() {
  for (const made of instances.values()) {
    const inst = await made.catch(() => undefined)
    for (const h of inst?.hooks ?? []) await h.dispose?.()?.catch?.(() => {})
  }
  instances.clear()
}

// ---- agentd additions (issue 38, the turn hooks): the event hook's
// flow control, and the config hooks' changes read back.

// eventSeen tells agentd, once per burst read, how many events arrived:
// agentd keeps no more than a window of them on their way (see live.go).
let eventsSeen = 0
let seenScheduled = false
function eventSeen() {
  eventsSeen++
  if (seenScheduled) return
  seenScheduled = true
  setImmediate(() => {
    seenScheduled = false
    send({ method: "events.seen", params: { n: eventsSeen } })
  })
}

// callEventHooks calls an instance's event hooks without awaiting them, as
// opencode does; an instance with eventHooksPending of them still running
// (a plugin slower than the events) misses the event, counted.
const eventHooksPending = 256
let eventsDropped = 0
function callEventHooks(inst, event) {
  for (const h of inst.hooks) {
    if (typeof h.event !== "function") continue
    if (inst.pending >= eventHooksPending) {
      if (eventsDropped++ % 1000 === 0)
        console.error(`plugin event hooks are behind: ${eventsDropped} events dropped so far`)
      continue
    }
    inst.pending++
    Promise.resolve()
      .then(() => h.event({ event }))
      .catch((err) => console.error("plugin event hook:", err?.stack ?? err))
      .finally(() => inst.pending--)
  }
}

const configMethods = {
  // config is the configuration as the instance's config hooks left it.
  async config(p) {
    return { config: (await made(p.directory)).config }
  },
}
// ---- end of agentd additions

const methods = {
  ...configMethods,
  async init(p) {
    settings = p
    modules = await load(p.plugins)
    return { loaded: modules.map((m) => ({ spec: m.spec, error: m.error })) }
  },
  async instance(p) {
    return describe(await instance(p))
  },
  async hooks(p) {
    if (p.sessionID) sessionDirs.set(p.sessionID, p.directory)
    const inst = await made(p.directory)
    const outputs = []
    for (const c of p.calls) outputs.push(await trigger(inst, c.name, c.input, c.output))
    return { outputs }
  },
  async transform(p) {
    if (p.sessionID) sessionDirs.set(p.sessionID, p.directory)
    return await transform(p)
  },
  async tool(p) {
    if (p.context?.sessionID) sessionDirs.set(p.context.sessionID, p.directory)
    return await runTool(p)
  },
  async ping() {
    return {}
  },
  async dispose() {
    await dispose()
    return {}
  },
}

const notifications = {
  event: (p) => {
    deliver(p.event)
    eventSeen()
  },
  cancel: (p) => calls.get(p.ref)?.abort(new Error(p.reason ?? "aborted")),
}

// ---- opencode's auth and provider hooks ----
// A provider's auth loader runs when agentd first calls a model of that
// provider with a stored credential (auth.load); the fetch it returns is
// kept here, per instance, and agentd's model calls come through it
// (fetch): the answer's head is the call's result, its body follows as
// fetch.chunk notifications (no more than agentd granted: see pump) and a
// fetch.end. The OAuth logins begun by
// authorize wait here for their callback.
const ANSWERED = Symbol("answered")
const authState = new WeakMap() // instance → {fetches, pending}
const fetchAborts = new Map() // fetch ref → AbortController
const fetchFlows = new Map() // fetch ref → {left: bytes granted, wake}

function authOf(inst) {
  let st = authState.get(inst)
  if (!st) authState.set(inst, (st = { fetches: new Map(), pending: new Map() }))
  return st
}

// authHook is the provider's auth hook as opencode keeps it: the last
// plugin's that names the provider.
function authHook(inst, provider) {
  let found
  for (const h of inst.hooks) if (h.auth?.provider === provider) found = h.auth
  return found
}

function publicPrompt(p) {
  const when = p.when ? { when: p.when } : {}
  if (p.type === "select") return { type: "select", key: p.key, message: p.message, options: p.options ?? [], ...when }
  const placeholder = p.placeholder ? { placeholder: p.placeholder } : {}
  return { type: "text", key: p.key, message: p.message, ...placeholder, ...when }
}

function mergeDeep(a, b) {
  const out = { ...a }
  for (const [k, v] of Object.entries(b ?? {})) {
    const plain = (x) => x && typeof x === "object" && !Array.isArray(x) && Object.getPrototypeOf(x) === Object.prototype
    out[k] = plain(out[k]) && plain(v) ? mergeDeep(out[k], v) : v
  }
  return out
}

function plainJSON(v) {
  try {
    return JSON.parse(JSON.stringify(v ?? {}))
  } catch {
    return {}
  }
}

// pump streams a fetch's body to agentd within the bytes agentd granted
// (its window, then fetch.credit as its reader consumes): past them it
// waits, and stops reading the provider's answer, so a slow reader holds
// up the provider instead of filling agentd's memory. An abort ends the
// wait and the body.
async function pump(ref, res, abort, window) {
  const flow = { left: window > 0 ? window : Infinity, wake: undefined }
  fetchFlows.set(ref, flow)
  const woken = () => {
    const w = flow.wake
    flow.wake = undefined
    w?.()
  }
  let error
  try {
    if (res.body) {
      const reader = res.body.getReader()
      abort.signal.addEventListener(
        "abort",
        () => {
          reader.cancel().catch(() => {})
          woken()
        },
        { once: true },
      )
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        for (let off = 0; off < (value?.length ?? 0); ) {
          while (flow.left <= 0 && !abort.signal.aborted) await new Promise((r) => (flow.wake = r))
          abort.signal.throwIfAborted()
          const n = Math.min(flow.left, value.length - off)
          send({ method: "fetch.chunk", params: { ref, data: Buffer.from(value.subarray(off, off + n)).toString("base64") } })
          flow.left -= n
          off += n
        }
      }
    }
  } catch (err) {
    error = String(err?.message ?? err)
  }
  fetchAborts.delete(ref)
  fetchFlows.delete(ref)
  send({ method: "fetch.end", params: { ref, error } })
}

Object.assign(methods, {
  async "auth.describe"(p) {
    const inst = await made(p.directory)
    const auth = {}
    for (const h of inst.hooks) {
      const a = h.auth
      if (!a || a.provider === undefined) continue
      auth[a.provider] = {
        methods: (a.methods ?? []).map((m) => ({
          type: m.type,
          label: m.label,
          ...(m.prompts ? { prompts: m.prompts.map(publicPrompt) } : {}),
        })),
        loader: typeof a.loader === "function" || auth[a.provider]?.loader === true,
      }
    }
    const providers = new Set()
    for (const h of inst.hooks) if (h.provider?.id && typeof h.provider.models === "function") providers.add(h.provider.id)
    return { auth, providers: [...providers] }
  },
  async "auth.load"(p) {
    const inst = await made(p.directory)
    const getAuth = () => request("auth.get", { provider: p.provider })
    let options = {}
    for (const h of inst.hooks) {
      if (h.auth?.provider !== p.provider || typeof h.auth.loader !== "function") continue
      options = mergeDeep(options, (await h.auth.loader(getAuth, structuredClone(p.info))) ?? {})
    }
    const { fetch: custom, ...rest } = options
    const st = authOf(inst)
    if (typeof custom === "function") st.fetches.set(p.provider, custom)
    else st.fetches.delete(p.provider)
    return { options: plainJSON(rest), fetch: typeof custom === "function" }
  },
  async fetch(p, id) {
    const inst = await made(p.directory)
    const f = authOf(inst).fetches.get(p.provider) ?? fetch
    const abort = new AbortController()
    fetchAborts.set(p.ref, abort)
    let res
    try {
      const body = p.body ? Buffer.from(p.body, "base64") : undefined
      res = await f(p.url, { method: p.method, headers: p.headers ?? {}, body, signal: abort.signal })
    } catch (err) {
      fetchAborts.delete(p.ref)
      throw err
    }
    const headers = {}
    // Bun's fetch has decoded the body already.
    res.headers.forEach((v, k) => {
      if (k !== "content-encoding" && k !== "content-length") headers[k] = v
    })
    send({ id, result: { status: res.status, statusText: res.statusText ?? "", headers } })
    pump(p.ref, res, abort, p.window)
    return ANSWERED
  },
  async "auth.authorize"(p) {
    const inst = await made(p.directory)
    const m = authHook(inst, p.provider)?.methods?.[p.method]
    if (!m) return { error: "BadRequest", message: `provider ${p.provider} has no login method ${p.method}` }
    if (m.type !== "oauth") return {}
    for (const q of m.prompts ?? []) {
      const v = p.inputs?.[q.key]
      if (q.type !== "text" || typeof q.validate !== "function" || v === undefined) continue
      const msg = q.validate(v)
      if (msg) return { error: "ProviderAuthValidationFailed", field: q.key, message: msg }
    }
    const r = await m.authorize(p.inputs)
    authOf(inst).pending.set(p.provider, r)
    return { authorization: { url: r.url, method: r.method, instructions: r.instructions } }
  },
  async "auth.callback"(p) {
    const inst = await made(p.directory)
    const r = authOf(inst).pending.get(p.provider)
    if (!r) return { error: "ProviderAuthOauthMissing" }
    if (r.method === "code" && !p.code) return { error: "ProviderAuthOauthCodeMissing" }
    const out = r.method === "code" ? await r.callback(p.code) : await r.callback()
    if (!out || out.type !== "success") return { error: "ProviderAuthOauthCallbackFailed" }
    return { result: plainJSON(out) }
  },
  async "provider.models"(p) {
    const inst = await made(p.directory)
    let info = p.info
    for (const h of inst.hooks) {
      if (h.provider?.id !== p.provider || typeof h.provider.models !== "function") continue
      const models = (await h.provider.models(structuredClone(info), { auth: p.auth ?? undefined })) ?? {}
      info = {
        ...info,
        models: Object.fromEntries(Object.entries(models).map(([k, m]) => [k, { ...m, id: k, providerID: p.provider }])),
      }
    }
    return { models: plainJSON(info.models) }
  },
})
notifications["fetch.abort"] = (p) => fetchAborts.get(p.ref)?.abort(new Error(p.reason ?? "aborted"))
notifications["fetch.credit"] = (p) => {
  const flow = fetchFlows.get(p.ref)
  if (!flow) return
  flow.left += p.bytes
  const w = flow.wake
  flow.wake = undefined
  w?.()
}
// ---- end of the auth and provider hooks ----

async function handle(msg) {
  if (msg.id !== undefined && msg.method === undefined) {
    const waiter = pending.get(msg.id)
    pending.delete(msg.id)
    if (msg.error) waiter?.reject(new Error(msg.error.message))
    else waiter?.resolve(msg.result)
    return
  }
  if (msg.id === undefined) {
    notifications[msg.method]?.(msg.params ?? {})
    return
  }
  try {
    const fn = methods[msg.method]
    if (!fn) throw new Error(`unknown method ${msg.method}`)
    const result = await fn(msg.params ?? {}, msg.id)
    if (result !== ANSWERED) send({ id: msg.id, result })
  } catch (err) {
    send({ id: msg.id, error: { message: String(err?.message ?? err), stack: String(err?.stack ?? "") } })
  }
}

process.on("unhandledRejection", (err) => console.error("plugin: unhandled rejection:", err?.stack ?? err))
// Requests arrive one JSON object a line on fd 3; Bun's own stream
// reads it (cheaper per line than node:readline's emulation).
async function readRequests() {
  const decoder = new TextDecoder()
  let buf = ""
  for await (const chunk of Bun.file(3).stream()) {
    buf += decoder.decode(chunk, { stream: true })
    let nl
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl)
      buf = buf.slice(nl + 1)
      if (!line) continue
      let msg
      try {
        msg = JSON.parse(line)
      } catch (err) {
        console.error("plugin host: bad request line:", err)
        continue
      }
      handle(msg)
    }
  }
  process.exit(0)
}
readRequests()
send({ method: "ready", params: { bun: Bun.version } })
