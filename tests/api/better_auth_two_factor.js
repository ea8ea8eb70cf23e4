#!/usr/bin/env node
// better-auth's own client with its twoFactorClient plugin against coachd's two-factor routes,
// with TOTP codes computed by an independent library (otpauth):
//
//   node better_auth_two_factor.js <baseURL> <origin of the web app> <email> <password>
//
// sign up -> twoFactor.enable -> twoFactor.verifyTotp (turns it on) -> sign out -> sign in
// (twoFactorRedirect, onTwoFactorRedirect called) -> twoFactor.verifyTotp -> getSession -> sign
// out -> sign in -> twoFactor.verifyBackupCode -> getSession -> the same backup code again
// (refused). Prints one JSON line: {"ok": true, "steps": {...}} or {"ok": false, "step", ...}
// and exits 0 / 1.
'use strict'

const { browserFetch } = require('./browser_fetch')

async function main () {
  const { createAuthClient } = await import('better-auth/client')
  const { twoFactorClient } = await import('better-auth/client/plugins')
  const OTPAuth = await import('otpauth')
  const [base, origin, email, password] = process.argv.slice(2)
  const cookiesSeen = []
  const { jar, fetch: jarFetch } = browserFetch(origin, name => cookiesSeen.push(name))

  let redirects = 0
  const client = createAuthClient({
    baseURL: base,
    fetchOptions: { customFetchImpl: jarFetch },
    plugins: [twoFactorClient({ onTwoFactorRedirect: () => { redirects++ } })]
  })

  const steps = {}
  let step = ''
  function ok (res) {
    if (res.error) throw new Error(`${step}: ${JSON.stringify(res.error)}`)
    return res.data
  }
  // A code of the step `offset` steps from now: each step is accepted once, so the setup and
  // the sign-in use different ones.
  const code = (totp, offset) => totp.generate({ timestamp: Date.now() + offset * 30000 })

  step = 'signUp'
  ok(await client.signUp.email({ email, password, name: 'Two Factor' }))
  step = 'enable'
  const en = ok(await client.twoFactor.enable({ password }))
  const totp = OTPAuth.URI.parse(en.totpURI)
  steps.enable = { backupCodes: en.backupCodes.length, algorithm: totp.algorithm, digits: totp.digits, period: totp.period }
  // Stay clear of a step boundary so that "now" and "one step back" stay what they are.
  const into = (Date.now() / 1000) % 30
  if (into > 26) await new Promise(resolve => setTimeout(resolve, (30 - into + 0.3) * 1000))
  step = 'verifyTotp (setup)'
  steps.verifySetup = ok(await client.twoFactor.verifyTotp({ code: code(totp, -1) }))
  step = 'signOut'
  ok(await client.signOut())
  step = 'signIn (redirect)'
  const si = ok(await client.signIn.email({ email, password }))
  steps.signIn = { twoFactorRedirect: si.twoFactorRedirect, redirects, hasTwoFactorCookie: jar.has('auth.two_factor'), hasSession: jar.has('auth.session_token') }
  step = 'verifyTotp (sign-in)'
  const vt = ok(await client.twoFactor.verifyTotp({ code: code(totp, 0) }))
  steps.verifyTotp = { userEmail: vt.user.email }
  step = 'getSession'
  steps.sessionAfterTotp = ok(await client.getSession()).user.email
  step = 'signOut 2'
  ok(await client.signOut())
  step = 'signIn 2'
  ok(await client.signIn.email({ email, password }))
  step = 'verifyBackupCode'
  const vb = ok(await client.twoFactor.verifyBackupCode({ code: en.backupCodes[0] }))
  steps.verifyBackupCode = { userEmail: vb.user.email }
  steps.sessionAfterBackup = ok(await client.getSession()).user.email
  step = 'backup code again'
  ok(await client.signOut())
  ok(await client.signIn.email({ email, password }))
  const again = await client.twoFactor.verifyBackupCode({ code: en.backupCodes[0] })
  steps.backupAgain = again.error
  steps.redirects = redirects
  process.stdout.write(JSON.stringify({ ok: true, steps }) + '\n')
}

main().catch(e => {
  process.stdout.write(JSON.stringify({ ok: false, error: String(e && e.stack ? e.stack : e) }) + '\n')
  process.exit(1)
})
