// S3-compatible server for the API tests (npm s3rver): serves bucket "coach-files" from --dir on
// a free port of 127.0.0.1 and writes the port to --port-file once it listens.
"use strict";
const fs = require("fs");
const S3rver = require("s3rver");

const arg = (name) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};

(async () => {
  const server = new S3rver({
    address: "127.0.0.1",
    port: 0,
    silent: true,
    directory: arg("--dir"),
    configureBuckets: [{ name: "coach-files" }],
  });
  const { port } = await server.run();
  fs.writeFileSync(arg("--port-file") + ".tmp", String(port));
  fs.renameSync(arg("--port-file") + ".tmp", arg("--port-file"));
  const stop = () => server.close().then(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
