// One fetch implementation for every exchange of the walk, whatever Node.js runs it: undici's
// own (pinned in package.json), installed as the global fetch and its classes. Node 18's
// built-in fetch has no Headers.getSetCookie, which the cookie jar needs.
import { Agent, FormData, Headers, Request, Response, fetch, setGlobalDispatcher } from "undici";

// localAddress: the loopback address to connect from (a per-IP rate-limit allowance of its own).
export function useUndici(localAddress: string): void {
  setGlobalDispatcher(new Agent({ localAddress }));
  Object.assign(globalThis, { fetch, FormData, Headers, Request, Response });
}
