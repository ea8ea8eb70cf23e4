// A typed coachd client: openapi-fetch over the paths generated from docs/openapi.json, one per
// user (its own cookie jar and organization context), every call checked by the Contract.
import createClient, { type Client, type Middleware } from "openapi-fetch";
import type { paths } from "./generated/openapi.js";
import { Contract, ContractError } from "./contract.mjs";

export type Api = Client<paths>;

// Every Set-Cookie of an answer (Headers.getSetCookie, Node 19.7 and later).
function storeCookies(jar: Map<string, string>, headers: Headers): void {
  for (const c of headers.getSetCookie()) {
    const [pair = "", ...attrs] = c.split(";");
    const eq = pair.indexOf("=");
    const name = pair.slice(0, eq).trim();
    const value = pair.slice(eq + 1).trim();
    if (value === "" || attrs.some((a) => /^\s*max-age=0\s*$/i.test(a))) jar.delete(name);
    else jar.set(name, value);
  }
}

// Checks every exchange against the document. Request bodies are read before sending and
// checked once the answer is a 2xx (a refused request may well be off the document).
function contractMiddleware(contract: Contract, log: (line: string) => void): Middleware {
  const bodies = new Map<string, string>();
  return {
    async onRequest({ request, schemaPath, id }) {
      contract.operation(request.method, schemaPath); // throws when not in the document
      if (request.body !== null) {
        const type = request.headers.get("content-type") ?? "";
        if (type.startsWith("application/json")) bodies.set(id, await request.clone().text());
      }
      return undefined;
    },
    async onResponse({ request, response, schemaPath, id }) {
      const op = contract.operation(request.method, schemaPath);
      const type = response.headers.get("content-type") ?? "";
      // JSON (and bodiless) answers are read whole; a stream is checked event by event
      // (streams.mts), file bytes by their media type.
      const media = type.split(";")[0]?.trim().toLowerCase() ?? "";
      const text = media === "" || media === "application/json"
        ? await response.clone().text() : null;
      contract.checkResponse(op, response.status, type, text);
      const body = bodies.get(id);
      bodies.delete(id);
      if (body !== undefined && response.status >= 200 && response.status < 300) {
        contract.checkRequest(op, body);
      }
      log(`${op.method} ${new URL(request.url).pathname} -> ${response.status}`);
      return undefined;
    },
  };
}

export class Person {
  readonly api: Api;
  readonly jar = new Map<string, string>();
  org: string | null = null; // X-Organization-Id for the following calls

  constructor(readonly name: string, baseUrl: string, contract: Contract) {
    this.api = createClient<paths>({ baseUrl, redirect: "manual" });
    const self = this;
    // Registered first so that it runs first on the request and last on the answer: the
    // contract then sees exactly what was sent and what came back.
    this.api.use({
      onRequest({ request }) {
        if (self.jar.size) {
          request.headers.set("cookie", [...self.jar].map(([k, v]) => `${k}=${v}`).join("; "));
        }
        if (self.org) request.headers.set("x-organization-id", self.org);
        return request;
      },
      onResponse({ response }) {
        storeCookies(self.jar, response.headers);
        return undefined;
      },
    });
    this.api.use(contractMiddleware(contract, (line) => console.log(`  [${name}] ${line}`)));
  }
}

// The typed result of a call: the answer when its status is the expected one, else a failure
// that shows what came back. `T` is the operation's success type from the document.
export function expectOk<T>(
  what: string,
  result: { data?: T; error?: unknown; response: Response },
  status: number,
): T {
  if (result.response.status !== status) {
    throw new ContractError(`${what}: expected ${status}, got ${result.response.status}: ` +
      JSON.stringify(result.error ?? result.data ?? null).slice(0, 2000));
  }
  if (result.data === undefined && status !== 204) {
    throw new ContractError(`${what}: ${status} without a body`);
  }
  return result.data as T;
}
