// A fetch that behaves as a browser's does towards coachd, for the tests that drive better-auth's
// own client (better_auth_client.js, better_auth_two_factor.js): it keeps cookies in a jar and
// sends Origin on every request, which Node's fetch does not; the client itself is used
// unchanged.
'use strict'

// Every Set-Cookie header of a response. Headers.getSetCookie() exists from Node 19.7 (Debian 12
// ships Node 18): otherwise the joined header is split at each comma that starts a new
// name=value pair (a comma inside an Expires date is followed by a digit, not a name).
function setCookies (headers) {
  if (typeof headers.getSetCookie === 'function') return headers.getSetCookie()
  const joined = headers.get('set-cookie')
  return joined ? joined.split(/,\s*(?=[^;,\s=]+=)/) : []
}

// { jar, fetch }: jar is a Map of the cookies held; onCookie(name), when given, hears the name of
// every cookie a response sets or clears.
function browserFetch (origin, onCookie) {
  const jar = new Map()
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
      if (onCookie) onCookie(name)
      const expired = attrs.some(a => /^\s*max-age=0\s*$/i.test(a)) || value === ''
      if (expired) jar.delete(name)
      else jar.set(name, value)
    }
    return res
  }
  return { jar, fetch: jarFetch }
}

module.exports = { browserFetch }
