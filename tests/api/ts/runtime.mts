// One fetch implementation for every exchange of the walk, whatever Node.js runs it: undici's
// own (pinned in package.json), installed as the global fetch and its classes. Node 18's
// built-in fetch has no Headers.getSetCookie, which the cookie jar needs.
import { Agent, FormData, Headers, Request, Response, fetch, setGlobalDispatcher } from "undici";
import type { RequestInit } from "undici";

// localAddress: the loopback address to connect from (a per-IP rate-limit allowance of its own).
export function useUndici(localAddress: string): void {
  setGlobalDispatcher(new Agent({ localAddress }));
  Object.assign(globalThis, { fetch, FormData, Headers, Request, Response });
}

// Presigned storage URLs name PUBLIC_URL's host (localhost in the tests), which may resolve to
// ::1 first while coachd listens on 127.0.0.1: they try every address of the name (as Python's
// client does) from whatever source address the system picks (they meet no rate limit anyway).
const direct = new Agent({ autoSelectFamily: true });

export function fetchStorage(url: string, init: RequestInit = {}): Promise<Response> {
  return fetch(url, { ...init, dispatcher: direct });
}
