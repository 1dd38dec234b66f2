// A provider login plugin for agentd's tests, modelled on
// opencode-anthropic-auth: an OAuth login (authorize, then a pasted code)
// whose tokens agentd stores; a loader that, for a stored login, returns a
// fetch that sends the access token as a bearer, adds a header of its own,
// sends the request to the address in its options (a local fake model)
// and refreshes an expired token through the client (PUT /auth/{id}); and
// a provider hook that adds a model. A stored key "stall-loader" makes
// the loader never answer, a prompt with "[stall]" the fetch. Options: target (the fake model's
// address), provider (its id, default "fake"), log (a file of JSON lines).
import { appendFileSync } from "node:fs"

export const OAuthLogin = async ({ client, directory }, options) => {
  const log = (x) => options?.log && appendFileSync(options.log, JSON.stringify(x) + "\n")
  const id = options?.provider ?? "fake"
  let refreshes = 0
  let refreshing
  return {
    auth: {
      provider: id,
      async loader(getAuth, provider) {
        const auth = await getAuth()
        log({ loader: auth.type, models: Object.keys(provider?.models ?? {}), dir: directory })
        if (auth.key === "stall-loader") await new Promise(() => {})
        if (auth.type !== "oauth") return {}
        return {
          apiKey: "",
          headers: { "x-loader-option": "from-loader" },
          async fetch(input, init) {
            let auth = await getAuth()
            if (auth.expires < Date.now()) {
              // One refresh at a time: a title's call runs beside the first step's.
              refreshing ??= (async () => {
                refreshes++
                const next = { type: "oauth", refresh: auth.refresh, access: `access-refreshed-${refreshes}`, expires: Date.now() + 3600_000 }
                await client.auth.set({ path: { id }, body: next })
                log({ refreshed: next.access })
              })().finally(() => (refreshing = undefined))
              await refreshing
              auth = await getAuth()
            }
            const body = typeof init?.body === "string" ? init.body : new TextDecoder().decode(init?.body ?? new Uint8Array())
            if (body.includes("[stall]")) {
              log({ stalled: true })
              await new Promise(() => {})
            }
            const headers = new Headers(init?.headers)
            headers.set("authorization", `Bearer ${auth.access}`)
            headers.set("x-plugin-auth", "oauth-login")
            headers.delete("x-api-key")
            const url = new URL(typeof input === "string" ? input : input.url)
            const target = new URL(options.target)
            url.protocol = target.protocol
            url.host = target.host
            return fetch(url, { ...init, headers })
          },
        }
      },
      methods: [
        {
          type: "oauth",
          label: "Log in with the test provider",
          prompts: [{ type: "text", key: "team", message: "Your team", placeholder: "e.g. red", validate: (v) => (v === "bad" ? "no such team" : undefined) }],
          async authorize(inputs) {
            log({ authorize: inputs ?? null })
            return {
              url: "https://login.invalid/authorize?team=" + (inputs?.team ?? ""),
              instructions: "Paste the code the page shows",
              method: "code",
              async callback(code) {
                if (code !== "good-code") return { type: "failed" }
                return { type: "success", refresh: "refresh-1", access: "access-1", expires: Date.now() + 3600_000, accountId: "acct-1" }
              },
            }
          },
        },
        { type: "api", label: "Paste an API key" },
      ],
    },
    provider: {
      id,
      async models(provider, ctx) {
        log({ providerHook: Object.keys(provider.models), auth: ctx.auth?.type ?? null })
        return {
          ...provider.models,
          "plugin-model": {
            id: "plugin-model",
            providerID: id,
            name: "A model from a plugin",
            api: { id: "fake-model", url: "", npm: "@ai-sdk/openai-compatible" },
            limit: { context: 50000, output: 2000 },
            cost: { input: 0, output: 0, cache: { read: 0, write: 0 } },
          },
        }
      },
    },
  }
}
