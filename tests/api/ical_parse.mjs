// Parses an iCalendar object with ical.js (the parser of Thunderbird's calendar and of many web
// calendars), independently of the server and of the Python tests' parser, and prints what a
// calendar app takes from it as JSON: the calendar's METHOD and each VEVENT's fields, times as
// UTC ISO strings, TEXT values unescaped. Usage: node ical_parse.mjs FILE
import { readFileSync } from "node:fs";
import ICAL from "ical.js";

const raw = readFileSync(process.argv[2], "utf8");
const cal = new ICAL.Component(ICAL.parse(raw));
const text = (c, name) => {
  const v = c.getFirstPropertyValue(name);
  return v === null ? null : String(v);
};
const events = cal.getAllSubcomponents("vevent").map((c) => {
  const ev = new ICAL.Event(c);
  const person = (name) => {
    const p = c.getFirstProperty(name);
    return p ? { value: String(p.getFirstValue()), cn: p.getParameter("cn") } : null;
  };
  return {
    uid: ev.uid,
    sequence: ev.sequence,
    status: text(c, "status"),
    start: ev.startDate.toJSDate().toISOString(),
    end: ev.endDate.toJSDate().toISOString(),
    summary: ev.summary,
    description: ev.description,
    location: ev.location,
    url: text(c, "url"),
    organizer: person("organizer"),
    attendee: person("attendee"),
  };
});
console.log(JSON.stringify({ method: text(cal, "method"), events }));
