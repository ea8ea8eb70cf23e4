#!/usr/bin/env node
// Decodes an AccessToken2 ("007") token with the independent npm implementation (agora-token)
// and prints what it finds as JSON:
//   node verify_agora_token.js <token> <appCertificate>
//   -> {"parsed", "signatureValid", "signatureValidWithWrongCert", "appId", "issueTs", "expire",
//       "salt", "services": [{"type", "privileges": {key: seconds}, "channel", "uid", "userId"}]}
'use strict'
const { AccessToken2 } = require('agora-token/src/AccessToken2')

const [token, cert] = process.argv.slice(2)
const t = new AccessToken2()
const parsed = t.from_string(token)
const out = { parsed }
if (parsed) {
  out.signatureValid = t.verifySignature(cert)
  // A certificate of the right shape but the wrong value must not verify.
  const wrong = cert.slice(0, -1) + (cert.endsWith('0') ? '1' : '0')
  const again = new AccessToken2()
  out.signatureValidWithWrongCert = again.from_string(token) && again.verifySignature(wrong)
  out.appId = Buffer.from(t.appId).toString()
  out.issueTs = t.issueTs
  out.expire = t.expire
  out.salt = t.salt
  out.services = t.services.map(s => ({
    type: s.service_type(),
    privileges: s.__privileges,
    channel: s.__channel_name !== undefined ? Buffer.from(s.__channel_name).toString() : undefined,
    uid: s.__uid !== undefined ? Buffer.from(s.__uid).toString() : undefined,
    userId: s.__user_id !== undefined ? Buffer.from(s.__user_id).toString() : undefined
  }))
}
process.stdout.write(JSON.stringify(out) + '\n')
