// A mentorship's event stream through the typed client: each event is parsed from the
// text/event-stream answer and checked against the item schema the document gives for it, and
// is then of the document's StreamEvent type.
import type { components } from "./generated/openapi.js";
import type { Person } from "./client.mjs";
import { type Contract, ContractError } from "./contract.mjs";

export type StreamEvent = components["schemas"]["StreamEvent"];

export class EventStream {
  private buffer = "";
  private queue: StreamEvent[] = [];
  private decoder = new TextDecoder();

  private constructor(
    private readonly reader: ReadableStreamDefaultReader<Uint8Array>,
    private readonly abort: AbortController,
    private readonly check: (event: unknown) => void,
  ) {}

  static async open(who: Person, contract: Contract, mentorshipId: string): Promise<EventStream> {
    const abort = new AbortController();
    const r = await who.api.GET("/api/events/mentorships/{mentorshipId}/events", {
      params: { path: { mentorshipId } },
      parseAs: "stream",
      signal: abort.signal,
    });
    if (r.response.status !== 200 || !r.data) {
      throw new ContractError(`event stream: ${r.response.status}`);
    }
    // The answer's headers come once the stream listens: what is published from now on arrives.
    const op = contract.operation("GET", "/api/events/mentorships/{mentorshipId}/events");
    return new EventStream(r.data.getReader(), abort,
      (event) => contract.checkEvent(op, 200, event));
  }

  // The next event named `name` (others are checked and skipped), within `ms`.
  async next(name: StreamEvent["event"], ms = 10000): Promise<StreamEvent> {
    const deadline = Date.now() + ms;
    for (;;) {
      const event = this.queue.shift();
      if (event) {
        if (event.event === name) return event;
        continue;
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new ContractError(`no ${name} event within ${ms} ms`);
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<null>((resolve) => {
        timer = setTimeout(() => resolve(null), left);
      });
      const chunk = await Promise.race([this.reader.read(), timeout]);
      clearTimeout(timer);
      if (chunk === null) continue; // the deadline check above ends it
      if (chunk.done) throw new ContractError(`the stream ended while waiting for ${name}`);
      this.feed(this.decoder.decode(chunk.value, { stream: true }));
    }
  }

  private feed(text: string): void {
    this.buffer += text.replace(/\r\n?/g, "\n");
    let end: number;
    while ((end = this.buffer.indexOf("\n\n")) >= 0) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const fields: { id?: string; event: string; data: string[] } = { event: "message", data: [] };
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue; // comments: keep-alives
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") fields.data.push(value);
        else if (field === "event") fields.event = value;
        else if (field === "id") fields.id = value;
      }
      if (fields.data.length === 0) continue; // no event (a retry: line alone)
      const raw = fields.data.join("\n");
      let data: unknown = raw;
      try {
        data = JSON.parse(raw);
      } catch {
        // not JSON (a ping's empty data): the schema says what it may be
      }
      const event = { ...(fields.id === undefined ? {} : { id: fields.id }), event: fields.event,
        data };
      this.check(event);
      this.queue.push(event as StreamEvent); // just checked against the document's schema
    }
  }

  close(): void {
    this.abort.abort();
  }
}
