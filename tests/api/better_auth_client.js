#!/usr/bin/env node
// Drives better-auth's own browser/React Native client (better-auth/client, createAuthClient)
// against coachd, so the API tests prove that the library client developers use works unchanged.
//
//   node better_auth_client.js <baseURL> <origin of the web app, one of coachd's TRUSTED_ORIGINS>
//
// Reads one JSON command per line on stdin and answers one JSON line per command on stdout:
//   {"call": "signUp.email", "args": {...}}  ->  {"data": ..., "error": ..., "status": N, "url": "..."}
//   {"cookies": true}                        ->  {"cookies": {name: value}}
// "call" is the client method path (e.g. "getSession", "requestPasswordReset"). The client keeps
// its cookies in a jar the way a browser would, so a session set by sign-in is sent afterwards.
'use strict'

const { browserFetch } = require('./browser_fetch')

async function main () {
  const { createAuthClient } = await import('better-auth/client')
  const base = process.argv[2]
  const origin = process.argv[3] || new URL(base).origin
  const { jar, fetch: browser } = browserFetch(origin)
  let last = { status: 0, url: '' }

  async function jarFetch (input, init = {}) {
    const res = await browser(input, init)
    last = { status: res.status, url: String(input.url ?? input.href ?? input) }
    return res
  }

  const client = createAuthClient({ baseURL: base, fetchOptions: { customFetchImpl: jarFetch } })

  const readline = require('readline')
  const rl = readline.createInterface({ input: process.stdin })
  for await (const line of rl) {
    if (!line.trim()) continue
    const cmd = JSON.parse(line)
    let out
    try {
      if (cmd.cookies) {
        out = { cookies: Object.fromEntries(jar) }
      } else {
        let fn = client
        for (const part of cmd.call.split('.')) fn = fn[part]
        const res = await fn(cmd.args || {})
        out = { data: res.data ?? null, error: res.error ?? null, status: last.status, url: last.url }
      }
    } catch (e) {
      out = { exception: String(e && e.stack ? e.stack : e) }
    }
    process.stdout.write(JSON.stringify(out) + '\n')
  }
}

main().catch(e => { console.error(e); process.exit(1) })
