#!/usr/bin/env node
// A JavaScript app's file round trip through coachd on the s3 driver, with the AWS SDK for
// JavaScript v3 (@aws-sdk/client-s3, @aws-sdk/s3-request-presigner) on the storage side:
//   1. POST /api/files/presign, PUT the bytes to coachd's presigned URL with the uploadHeaders
//      it names (what an app does with them), the SDK reads the object back from the bucket
//      (HeadObject, GetObject, and a GET through the SDK's own presigned URL), register,
//      download through GET /api/files/:id;
//   2. the SDK uploads (PutObject) under a key coachd presigned, coachd registers it (HEAD and a
//      hashed GET, header-signed) and serves it through GET /api/files/:id.
// Prints one JSON line {"ok": true, "checks": [...]}; exits 1 with the failure otherwise.
//
//   node s3_sdk_client.js '{"base", "token", "org", "s3", "bucket", "access", "secret"}'
'use strict'
const crypto = require('crypto')
const { S3Client, HeadObjectCommand, GetObjectCommand, PutObjectCommand } = require('@aws-sdk/client-s3')
const { getSignedUrl } = require('@aws-sdk/s3-request-presigner')

const a = JSON.parse(process.argv[2])
const checks = []
const check = (what, cond, detail) => {
  if (!cond) throw new Error(what + (detail === undefined ? '' : ': ' + JSON.stringify(detail)))
  checks.push(what)
}
const sha = b => crypto.createHash('sha256').update(b).digest('hex')

async function api (method, path, body) {
  const headers = { cookie: `auth.session_token=${a.token}`, 'x-organization-id': a.org }
  if (body !== undefined) headers['content-type'] = 'application/json'
  const r = await fetch(a.base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  const text = await r.text()
  return { status: r.status, json: text ? JSON.parse(text) : null }
}

async function download (fileId) {
  const f = await api('GET', '/api/files/' + fileId)
  check('GET /api/files/:id answers 200', f.status === 200, f)
  const r = await fetch(f.json.data.presignedUrl)
  check('the presigned download answers 200', r.status === 200, r.status)
  return { file: f.json.data, bytes: Buffer.from(await r.arrayBuffer()), type: r.headers.get('content-type') }
}

;(async () => {
  const s3 = new S3Client({
    endpoint: a.s3,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: a.access, secretAccessKey: a.secret }
  })

  // 1. Upload through coachd's presigned URL.
  const data = crypto.randomBytes(300 * 1024)
  const p = await api('POST', '/api/files/presign', { filename: 'sdk report.pdf', mimeType: 'application/pdf', sizeBytes: data.length })
  check('presign answers 200', p.status === 200, p)
  const key = p.json.data.storageKey
  const uh = p.json.data.uploadHeaders
  check('presign names the upload headers', uh['Content-Type'] === 'application/pdf' && uh['If-None-Match'] === '*' && Object.keys(uh).length === 2, uh)
  const put = await fetch(p.json.data.presignedUrl, { method: 'PUT', body: data, headers: uh })
  check('PUT to the presigned URL answers 200', put.status === 200, put.status)
  const head = await s3.send(new HeadObjectCommand({ Bucket: a.bucket, Key: key }))
  check('the SDK sees the object with its size and type', head.ContentLength === data.length && head.ContentType === 'application/pdf', head)
  const got = await s3.send(new GetObjectCommand({ Bucket: a.bucket, Key: key }))
  check('the SDK reads the same bytes', Buffer.from(await got.Body.transformToByteArray()).equals(data))
  const sdkUrl = await getSignedUrl(s3, new GetObjectCommand({ Bucket: a.bucket, Key: key }), { expiresIn: 300 })
  check('the SDK\'s own presigned URL reads the same bytes', Buffer.from(await (await fetch(sdkUrl)).arrayBuffer()).equals(data))
  const reg = await api('POST', '/api/files/register', { storageKey: key, filename: 'sdk report.pdf', mimeType: 'application/pdf', sizeBytes: data.length })
  check('register answers 201 with the hash', reg.status === 201 && reg.json.data.sha256Hash === sha(data), reg)
  const d1 = await download(reg.json.data.fileId)
  check('GET file downloads the same bytes', d1.bytes.equals(data) && d1.type === 'application/pdf', d1.type)

  // 2. The SDK uploads under a key coachd handed out.
  const data2 = crypto.randomBytes(64 * 1024 + 7)
  const p2 = await api('POST', '/api/files/presign', { filename: 'photo ñ.png', mimeType: 'image/png', sizeBytes: data2.length })
  check('second presign answers 200', p2.status === 200, p2)
  await s3.send(new PutObjectCommand({ Bucket: a.bucket, Key: p2.json.data.storageKey, Body: data2, ContentType: 'image/png' }))
  const reg2 = await api('POST', '/api/files/register', { storageKey: p2.json.data.storageKey, filename: 'photo ñ.png', mimeType: 'image/png', sizeBytes: data2.length })
  check('coachd registers the SDK\'s object with its hash', reg2.status === 201 && reg2.json.data.sha256Hash === sha(data2), reg2)
  const d2 = await download(reg2.json.data.fileId)
  check('GET file downloads the SDK\'s bytes', d2.bytes.equals(data2) && d2.file.sha256Hash === sha(data2))

  process.stdout.write(JSON.stringify({ ok: true, checks }) + '\n')
})().catch(e => {
  process.stdout.write(JSON.stringify({ ok: false, error: String(e && e.stack || e), checks }) + '\n')
  process.exit(1)
})
