// Shapes for answers whose schema in the document is still free-form ({} or a bare object),
// whose generated type is therefore `unknown` (or an object without fields).
// `known(value, guard)` has the document's type as soon as the document describes the answer,
// and the guard's type (checked at run time) only while it does not: the walk reads fields the
// same way in both cases, and from the day a schema lands tsc checks every field the walk reads
// against it.
import { ContractError } from "./contract.mjs";

export type Guard<T> = (v: unknown, at: string) => T;
// Free-form: {} gives `unknown`, {"type": "object"} gives Record<string, never>.
type FreeForm<T> = unknown extends T ? true
  : [T] extends [Record<string, never>] ? [Record<string, never>] extends [T] ? true : false
  : false;
export type Known<T, F> = FreeForm<T> extends true ? F : T;

export function known<T, F>(value: T, guard: Guard<F>): Known<T, F> {
  guard(value, "answer");
  return value as Known<T, F>; // the same value: its type is the document's, or the guard's
}

function fail(at: string, want: string, v: unknown): never {
  throw new ContractError(`${at}: expected ${want}, got ${JSON.stringify(v)?.slice(0, 200)}`);
}

export const str: Guard<string> = (v, at) => (typeof v === "string" ? v : fail(at, "a string", v));
export const num: Guard<number> = (v, at) => (typeof v === "number" ? v : fail(at, "a number", v));
export const bool: Guard<boolean> = (v, at) =>
  typeof v === "boolean" ? v : fail(at, "a boolean", v);

export function nullable<T>(g: Guard<T>): Guard<T | null> {
  return (v, at) => (v === null ? null : g(v, at));
}

export function arr<T>(g: Guard<T>): Guard<T[]> {
  return (v, at) =>
    Array.isArray(v) ? v.map((x, i) => g(x, `${at}[${i}]`)) : fail(at, "an array", v);
}

export function obj<S extends Record<string, Guard<unknown>>>(
  shape: S,
): Guard<{ [K in keyof S]: ReturnType<S[K]> }> {
  return (v, at) => {
    if (typeof v !== "object" || v === null || Array.isArray(v)) fail(at, "an object", v);
    const rec = v as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const [k, g] of Object.entries(shape)) out[k] = g(rec[k], `${at}.${k}`);
    return out as { [K in keyof S]: ReturnType<S[K]> };
  };
}

export function data<T>(g: Guard<T>): Guard<{ data: T }> {
  return obj({ data: g });
}
