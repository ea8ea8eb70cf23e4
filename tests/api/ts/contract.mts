// The runtime half of the typed client: every request and answer checked against the OpenAPI
// document the types were generated from, so a server that drifts from the document fails the
// walk even where the types cannot see it (a field the walk never reads, a status, a format).
//
// Rules (the same as the Python suite's openapi_check.py):
// - the operation (method + path template) must be in the document;
// - the answer's status must be one the operation lists;
// - a JSON answer must match the schema given for that status (JSON Schema 2020-12, formats
//   checked, #/components references resolved against the document);
// - a JSON request body that got a 2xx answer must match the operation's request schema with
//   unknown properties refused (the server ignores unknown fields, so a client relying on one
//   would silently lose it).
import { readFileSync } from "node:fs";
import { Ajv2020 } from "ajv/dist/2020.js";
import type { ErrorObject, ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";

// ajv-formats is CommonJS: under NodeNext its default import is the module object.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

function isObject(v: Json | undefined): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

// RFC 6901 pointer segment.
function escape(segment: string): string {
  return segment.replace(/~/g, "~0").replace(/\//g, "~1");
}

function lookup(root: JsonObject, pointer: string): Json | undefined {
  let node: Json | undefined = root;
  for (const raw of pointer.replace(/^#\/?/, "").split("/")) {
    if (raw === "") continue;
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    node = isObject(node) ? node[key] : undefined;
  }
  return node;
}

// A copy of the document in which every object schema that lists properties refuses others:
// used for request bodies only (answers say additionalProperties themselves).
function closeObjects(node: Json, underCombinator = false): Json {
  if (Array.isArray(node)) return node.map((n) => closeObjects(n, underCombinator));
  if (!isObject(node)) return node;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(node)) {
    out[k] = closeObjects(v, k === "allOf");
  }
  if (isObject(out.properties) && !("additionalProperties" in out) && !underCombinator &&
      !("unevaluatedProperties" in out)) {
    out.additionalProperties = false;
  }
  return out;
}

export class ContractError extends Error {}

export interface Operation {
  method: string;
  template: string; // the document's path, e.g. /api/mentorships/{id}
  pointer: string; // #/paths/~1api~1mentorships~1{id}/post
  node: JsonObject;
}

export class Contract {
  readonly doc: JsonObject;
  private ajv: Ajv2020;
  private strictAjv: Ajv2020;
  private compiled = new Map<string, ValidateFunction>();
  readonly seen = new Set<string>(); // "POST /api/x 201"

  constructor(path: string) {
    const parsed = JSON.parse(readFileSync(path, "utf8")) as Json;
    if (!isObject(parsed) || !isObject(parsed.paths)) {
      throw new ContractError(`${path}: not an OpenAPI document`);
    }
    this.doc = parsed;
    // strict: false because the document is an OpenAPI file, not a schema: its other members
    // (paths, info, ...) and keywords such as "example" are not JSON Schema.
    const make = (doc: JsonObject): Ajv2020 => {
      const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
      addFormats(ajv);
      ajv.addSchema({ ...doc, $id: "openapi.json" });
      return ajv;
    };
    this.ajv = make(this.doc);
    this.strictAjv = make(closeObjects(this.doc) as JsonObject);
  }

  operation(method: string, template: string): Operation {
    const m = method.toLowerCase();
    const pointer = `#/paths/${escape(template)}/${m}`;
    const node = lookup(this.doc, pointer);
    if (!isObject(node)) {
      throw new ContractError(`${method} ${template}: not in the document`);
    }
    return { method: method.toUpperCase(), template, pointer, node };
  }

  private validator(ajv: Ajv2020, pointer: string): ValidateFunction {
    const key = (ajv === this.strictAjv ? "strict:" : "") + pointer;
    let v = this.compiled.get(key);
    if (!v) {
      v = ajv.compile({ $ref: "openapi.json" + pointer });
      this.compiled.set(key, v);
    }
    return v;
  }

  private static explain(errors: ErrorObject[] | null | undefined): string {
    return (errors ?? [])
      .slice(0, 10)
      .map((e) => `${e.instancePath || "(root)"} ${e.message ?? ""} ${JSON.stringify(e.params)}`)
      .join("; ");
  }

  // A response object, following one $ref to #/components/responses.
  private response(op: Operation, status: number): { pointer: string; node: JsonObject } | null {
    const responses = op.node.responses;
    if (!isObject(responses)) return null;
    let pointer = `${op.pointer}/responses/${status}`;
    let node = responses[String(status)];
    if (isObject(node) && typeof node.$ref === "string") {
      pointer = node.$ref;
      node = lookup(this.doc, node.$ref);
    }
    return isObject(node) ? { pointer, node } : null;
  }

  // body: the answer's text, or null when it was not read (a stream, file bytes).
  checkResponse(op: Operation, status: number, contentType: string, body: string | null): void {
    const name = `${op.method} ${op.template}`;
    const res = this.response(op, status);
    if (!res) {
      throw new ContractError(`${name}: answered ${status}, which the document does not list ` +
        `for this operation: ${(body ?? contentType).slice(0, 500)}`);
    }
    this.seen.add(`${name} ${status}`);
    const media = contentType.split(";")[0]?.trim().toLowerCase() ?? "";
    const content = res.node.content;
    if (!isObject(content)) {
      if (body === null || body !== "") {
        throw new ContractError(`${name} ${status}: a body (${contentType}) the document does ` +
          `not describe: ${(body ?? "").slice(0, 500)}`);
      }
      return;
    }
    if (body === "") {
      throw new ContractError(`${name} ${status}: no body, the document describes ` +
        Object.keys(content).join(", "));
    }
    if (!(media in content)) {
      throw new ContractError(`${name} ${status}: Content-Type ${contentType}, the document ` +
        `lists ${Object.keys(content).join(", ")}`);
    }
    if (media !== "application/json" || body === null) return; // described by media type
    const v = this.validator(this.ajv, `${res.pointer}/content/${escape(media)}/schema`);
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      throw new ContractError(`${name} ${status}: Content-Type JSON but the body does not parse`);
    }
    if (!v(parsed)) {
      throw new ContractError(`${name} ${status}: the answer does not match the document: ` +
        `${Contract.explain(v.errors)}\nbody: ${body.slice(0, 2000)}`);
    }
  }

  // One event of a text/event-stream answer ({id, event, data} with data parsed as JSON when it
  // is JSON), against the schema the document gives for each item of the stream.
  checkEvent(op: Operation, status: number, event: unknown): void {
    const res = this.response(op, status);
    const base = `${res?.pointer ?? op.pointer}/content/text~1event-stream`;
    const media = lookup(this.doc, base);
    if (!isObject(media)) {
      throw new ContractError(`${op.method} ${op.template} ${status}: no text/event-stream answer`);
    }
    const schema = isObject(media["x-itemSchema"]) ? `${base}/x-itemSchema`
      : `${base}/schema/contentSchema`;
    if (!isObject(lookup(this.doc, schema))) {
      throw new ContractError(`${op.method} ${op.template}: the document describes no event`);
    }
    const v = this.validator(this.ajv, schema);
    if (!v(event)) {
      throw new ContractError(`${op.method} ${op.template}: an event that does not match the ` +
        `document: ${Contract.explain(v.errors)}\nevent: ${JSON.stringify(event).slice(0, 2000)}`);
    }
  }

  // Called after a 2xx answer to a request that carried a JSON body.
  checkRequest(op: Operation, body: string): void {
    const name = `${op.method} ${op.template}`;
    const rb = op.node.requestBody;
    const content = isObject(rb) ? rb.content : undefined;
    if (!isObject(content) || !isObject(content["application/json"])) {
      throw new ContractError(`${name}: sent a JSON body, but the document describes none`);
    }
    const v = this.validator(this.strictAjv,
      `${op.pointer}/requestBody/content/application~1json/schema`);
    if (!v(JSON.parse(body))) {
      throw new ContractError(`${name}: the request body does not match the document ` +
        `(unknown properties refused): ${Contract.explain(v.errors)}\n` +
        `body: ${body.slice(0, 2000)}`);
    }
  }
}
