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

// Every Set-Cookie header of a response. Headers.getSetCookie() exists from Node 19.7 (Node 20
// here, but Debian 12 ships Node 18): otherwise the joined header is split at each comma that
// starts a new name=value pair (a comma inside an Expires date is followed by a digit, not a name).
function setCookies (headers) {
  if (typeof headers.getSetCookie === 'function') return headers.getSetCookie()
  const joined = headers.get('set-cookie')
  return joined ? joined.split(/,\s*(?=[^;,\s=]+=)/) : []
}

async function main () {
  const { createAuthClient } = await import('better-auth/client')
  const base = process.argv[2]
  const origin = process.argv[3] || new URL(base).origin
  const jar = new Map()
  let last = { status: 0, url: '' }

  // A browser sends Origin on every cross-document POST and keeps cookies; Node's fetch does
  // neither, so this fetch adds both (the client itself is used unchanged).
  async function jarFetch (input, init = {}) {
    const headers = new Headers(init.headers || {})
    if (jar.size) headers.set('cookie', [...jar].map(([k, v]) => `${k}=${v}`).join('; '))
    headers.set('origin', origin)
    const res = await fetch(input, { ...init, headers, redirect: 'manual' })
    for (const c of setCookies(res.headers)) {
      const [pair, ...attrs] = c.split(';')
      const eq = pair.indexOf('=')
      const name = pair.slice(0, eq).trim()
      const value = pair.slice(eq + 1).trim()
      const expired = attrs.some(a => /^\s*max-age=0\s*$/i.test(a)) || value === ''
      if (expired) jar.delete(name)
      else jar.set(name, value)
    }
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
