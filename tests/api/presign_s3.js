// Presigns one S3 request with the AWS SDK for JavaScript v3 at a pinned clock and prints the
// URL: the independent implementation that domain/sigv4 is compared with (test_sigv4_sdk.py).
// Input: one JSON object argument {method, endpoint, region, bucket, key, access, secret,
// date ("YYYYMMDDTHHMMSSZ"), expires, path_style, content_type?, content_length?,
// if_none_match?, disposition?, response_type?}.
//
// Requests whose only signed header is host go through S3RequestPresigner (what getSignedUrl
// uses). That presigner never signs content-type, so uploads bound to a Content-Type and a
// size (and If-None-Match: *, S3's refusal to overwrite) are signed by the SDK's SignatureV4
// itself, configured as the presigner configures it (S3: path not escaped twice,
// x-amz-content-sha256 UNSIGNED-PAYLOAD hoisted to the query); SignatureV4 signs every header
// of the request but the few it never signs, if-none-match included.
"use strict";
const crypto = require("crypto");
const { S3RequestPresigner } = require("@aws-sdk/s3-request-presigner");
const { SignatureV4 } = require("@smithy/signature-v4");

class Sha256 {
  constructor(secret) {
    this.h = secret ? crypto.createHmac("sha256", secret) : crypto.createHash("sha256");
  }
  update(d) {
    this.h.update(d);
  }
  async digest() {
    return new Uint8Array(this.h.digest());
  }
}

// RFC 3986: everything but unreserved characters is %XX (as the SDK's escapeUri).
const esc = (s) =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());

(async () => {
  const a = JSON.parse(process.argv[2]);
  const u = new URL(a.endpoint);
  const hostname = (a.path_style ? "" : a.bucket + ".") + u.hostname;
  const port = u.port ? Number(u.port) : undefined;
  const keyPath = a.key.split("/").map(esc).join("/");
  const path = a.path_style ? "/" + esc(a.bucket) + "/" + keyPath : "/" + keyPath;
  const query = {};
  if (a.disposition) query["response-content-disposition"] = a.disposition;
  if (a.response_type) query["response-content-type"] = a.response_type;
  const host = hostname + (port ? ":" + port : "");
  const headers = { host };
  const d = a.date;
  const signingDate = new Date(
    Date.UTC(+d.slice(0, 4), +d.slice(4, 6) - 1, +d.slice(6, 8), +d.slice(9, 11), +d.slice(11, 13), +d.slice(13, 15))
  );
  const credentials = { accessKeyId: a.access, secretAccessKey: a.secret };
  const request = { method: a.method, protocol: u.protocol, hostname, port, path, query, headers };
  let signed;
  if (a.content_type === undefined && a.content_length === undefined && a.if_none_match === undefined) {
    const p = new S3RequestPresigner({ credentials, region: a.region, sha256: Sha256 });
    signed = await p.presign(request, { signingDate, expiresIn: a.expires });
  } else {
    if (a.content_type !== undefined) headers["content-type"] = a.content_type;
    if (a.content_length !== undefined) headers["content-length"] = String(a.content_length);
    if (a.if_none_match !== undefined) headers["if-none-match"] = a.if_none_match;
    headers["X-Amz-Content-Sha256"] = "UNSIGNED-PAYLOAD"; // spelled as the presigner spells it
    const s = new SignatureV4({
      credentials, region: a.region, service: "s3", sha256: Sha256, uriEscapePath: false, applyChecksum: false,
    });
    signed = await s.presign(request, { signingDate, expiresIn: a.expires });
  }
  const q = Object.keys(signed.query)
    .sort((x, y) => (x === "X-Amz-Signature") - (y === "X-Amz-Signature") || (x < y ? -1 : x > y ? 1 : 0))
    .map((k) => esc(k) + "=" + esc(signed.query[k]))
    .join("&");
  process.stdout.write(u.protocol + "//" + host + signed.path + "?" + q + "\n");
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
