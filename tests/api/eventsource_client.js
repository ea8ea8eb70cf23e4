#!/usr/bin/env node
// Listens to a coachd event stream with the `eventsource` package (the EventSource of Node and
// React Native apps), unchanged, and prints one JSON line per thing it sees:
//   {"kind": "open"} | {"kind": "error"} | {"kind": "event", "type", "data", "lastEventId"}
//
//   node eventsource_client.js <stream URL> <session token> <event type>...
// The session cookie is added by the fetch the package lets apps supply (as React Native apps do).
'use strict'
const { EventSource } = require('eventsource')

const [url, token, ...types] = process.argv.slice(2)
const out = o => process.stdout.write(JSON.stringify(o) + '\n')
const es = new EventSource(url, {
  fetch: (input, init) => fetch(input, {
    ...init,
    headers: { ...init.headers, cookie: `auth.session_token=${token}` }
  })
})
es.onopen = () => out({ kind: 'open' })
es.onerror = e => out({ kind: 'error', code: e.code ?? null, message: e.message ?? null })
for (const type of types) {
  es.addEventListener(type, e => out({ kind: 'event', type, data: e.data, lastEventId: e.lastEventId }))
}
process.stdin.on('end', () => { es.close(); process.exit(0) })
process.stdin.resume()
