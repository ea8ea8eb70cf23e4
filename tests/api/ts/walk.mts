// The typed client's walk: sign-up -> organization -> invite -> mentorship -> session -> chat
// (and its event) -> file against a running coachd, every call through the client generated
// from docs/openapi.json (tsc checks what the walk sends and reads) and checked against the
// same document at run time (contract.mts). Run by test_typed_client.py; exits non-zero on the
// first failure.
//
// Environment: COACHD_URL, COACHD_OPENAPI (the document), COACHD_ADMIN_TOKEN (the session
// cookie of a PlatformAdmin the test made), COACHD_SOURCE_IP (a loopback address to connect
// from, so the walk has a per-IP rate-limit allowance of its own).
import { createHash, randomUUID } from "node:crypto";
import { Contract, ContractError } from "./contract.mjs";
import { Person, expectOk } from "./client.mjs";
import { fetchStorage, useUndici } from "./runtime.mjs";
import { EventStream } from "./streams.mjs";

function env(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

function check(cond: boolean, what: string): void {
  if (!cond) throw new ContractError(`check failed: ${what}`);
}

const SESSION_COOKIE = "auth.session_token";
const PASSWORD = "correct horse battery";

function step(name: string): void {
  console.log(`- ${name}`);
}

async function main(): Promise<void> {
  const base = env("COACHD_URL");
  const contract = new Contract(env("COACHD_OPENAPI"));
  useUndici(env("COACHD_SOURCE_IP"));
  const started = Date.now();
  const tag = randomUUID().slice(0, 8);

  const admin = new Person("admin", base, contract);
  admin.jar.set(SESSION_COOKIE, env("COACHD_ADMIN_TOKEN"));
  const coach = new Person("coach", base, contract);
  const teacher = new Person("teacher", base, contract);
  const anonymous = new Person("anonymous", base, contract);

  step("sign-up: two accounts");
  const signUp = async (p: Person, name: string) => {
    const email = `typed-${p.name}-${tag}@example.com`;
    const r = expectOk(`sign-up ${p.name}`, await p.api.POST("/api/auth/sign-up/email", {
      body: { email, password: PASSWORD, name },
    }), 200);
    check(r.user.email === email, "sign-up answers the address signed up");
    check(p.jar.has(SESSION_COOKIE), "sign-up sets the session cookie");
    return r.user;
  };
  const coachUser = await signUp(coach, "Carla Coach");
  const teacherUser = await signUp(teacher, "Teo");
  check(coachUser.id !== teacherUser.id, "two accounts");

  step("organization: a PlatformAdmin creates one");
  const orgName = `Typed ${tag}`;
  const org = expectOk("create organization",
    await admin.api.POST("/api/organizations", { body: { name: orgName } }), 201);
  check(org.data.name === orgName && org.data.status === "active", "the organization as created");
  admin.org = org.data.id;

  step("invite: the coach and the teacher");
  const invite = async (email: string, role: "Coach" | "Teacher") =>
    expectOk(`invite ${email}`, await admin.api.POST("/api/organizations/{id}/invites", {
      params: { path: { id: org.data.id } }, body: { email, roleInOrganization: role },
    }), 201);
  const coachInvite = await invite(coachUser.email, "Coach");
  const teacherInvite = await invite(teacherUser.email, "Teacher");
  check(coachInvite.data.status === "pending" && coachInvite.data.roleInOrganization === "Coach",
    "a pending Coach invite");

  step("invite: the coach accepts from its pending list");
  const pending = expectOk("my pending invites",
    await coach.api.GET("/api/invites/my-pending", {}), 200);
  const mine = pending.data.find((i) => i.id === coachInvite.data.id);
  check(mine !== undefined && mine.organizationName === orgName,
    "the invite is pending for the coach");
  const accepted = expectOk("accept (coach)",
    await coach.api.POST("/api/invites/{id}/accept", {
      params: { path: { id: coachInvite.data.id } },
    }), 200);
  check(accepted.data.status === "accepted" && accepted.data.organizationId === org.data.id,
    "the coach's invite accepted");

  step("invite: the teacher resolves the invite token (anonymous), then accepts");
  // The token is answered outside production only (the test server is not production).
  const token = teacherInvite.data.inviteToken;
  if (token === undefined) throw new ContractError("the invite answer carries no inviteToken");
  const info = expectOk("resolve token", await anonymous.api.GET("/api/invites/{token}", {
    params: { path: { token } },
  }), 200);
  check(info.data.isAvailable && info.data.hasAccount && info.data.organizationName === orgName,
    "the token resolves to an available invite for an existing account");
  expectOk("accept (teacher)", await teacher.api.POST("/api/invites/{id}/accept", {
    params: { path: { id: teacherInvite.data.id } },
  }), 200);

  step("the accepted organization is the coach's current one");
  const me = expectOk("me", await coach.api.GET("/api/users/me", {}), 200);
  check(me.data.currentOrganizationId === org.data.id && me.data.role === "Coach",
    `current organization and role: ${JSON.stringify(me.data)}`);

  step("mentorship: the coach proposes one, an administrator activates it");
  const created = expectOk("create mentorship", await coach.api.POST("/api/mentorships", {
    body: { organizationId: org.data.id, coachId: coachUser.id, teacherId: teacherUser.id,
      title: "Typed walk" },
  }), 201);
  check(created.data.status === "pending" && created.data.coachId === coachUser.id &&
    created.data.teacherId === teacherUser.id, "a pending mentorship of the pair");
  const mentorshipId = created.data.id;
  const active = expectOk("activate mentorship", await admin.api.PATCH(
    "/api/mentorships/{id}", { params: { path: { id: mentorshipId } }, body: { status: "active" } },
  ), 200);
  check(active.data.status === "active", "the mentorship is active");

  step("session: the coach schedules one, the teacher confirms it");
  const at = new Date(Date.now() + 24 * 3600 * 1000);
  at.setUTCSeconds(0, 0);
  const session = expectOk("create session", await coach.api.POST("/api/sessions", {
    body: { mentorshipId, scheduledAt: at.toISOString(), durationMinutes: 45 },
  }), 201);
  check(session.data.status === "scheduled" && session.data.durationMinutes === 45 &&
    Date.parse(session.data.scheduledAt) === at.getTime() && session.data.videoChannel !== null,
    "a scheduled session with a video channel");
  const detail = expectOk("session detail", await teacher.api.GET("/api/sessions/{id}", {
    params: { path: { id: session.data.id } },
  }), 200);
  check(detail.data.mentorship.id === mentorshipId && detail.data.coach.id === coachUser.id &&
    detail.data.teacher.id === teacherUser.id && detail.data.teacher.firstName === "Teo" &&
    detail.data.teacher.lastName === null, "the session's mentorship and participants");
  const confirmed = expectOk("confirm session", await teacher.api.PATCH("/api/sessions/{id}", {
    params: { path: { id: session.data.id } }, body: { status: "confirmed" },
  }), 200);
  check(confirmed.data.status === "confirmed", "the teacher confirmed");

  step("chat: a message (seen on the teacher's event stream), a reply, the history, unread " +
    "and the read receipt");
  const stream = await EventStream.open(teacher, contract, mentorshipId);
  const clientMessageId = randomUUID();
  const first = expectOk("post message",
    await coach.api.POST("/api/mentorships/{id}/chat/messages", {
      params: { path: { id: mentorshipId } },
      body: { body: "Hello from the typed client", clientMessageId },
    }), 201);
  check(first.data.clientMessageId === clientMessageId && first.data.senderId === coachUser.id,
    "the message as sent");
  const event = await stream.next("chat-message");
  stream.close();
  check(event.event === "chat-message" && event.data.id === first.data.id &&
    event.id !== undefined, "the message's event, with its id, on the teacher's stream");
  const reply = expectOk("post reply",
    await teacher.api.POST("/api/mentorships/{id}/chat/messages", {
      params: { path: { id: mentorshipId } },
      body: { body: "Hi!", replyToMessageId: first.data.id },
    }), 201);
  check(reply.data.replyTo !== null && reply.data.replyTo.id === first.data.id,
    "the reply carries its parent's preview");
  const history = expectOk("history",
    await coach.api.GET("/api/mentorships/{id}/chat/messages", {
      params: { path: { id: mentorshipId } },
    }), 200);
  check(history.data.map((m) => m.id).join() === [reply.data.id, first.data.id].join() &&
    !history.meta.hasMore, "the history, newest first");
  const unread = expectOk("unread", await coach.api.GET("/api/mentorships/{id}/chat/unread", {
    params: { path: { id: mentorshipId } },
  }), 200);
  check(unread.data.unreadCount === 1 && unread.data.mentorshipId === mentorshipId,
    `one unread message for the coach: ${JSON.stringify(unread)}`);
  expectOk("read receipt", await coach.api.PATCH("/api/mentorships/{id}/chat/read-receipt", {
    params: { path: { id: mentorshipId } }, body: { lastReadMessageId: reply.data.id },
  }), 204);
  const after = expectOk("unread after the receipt", await coach.api.GET(
    "/api/mentorships/{id}/chat/unread", { params: { path: { id: mentorshipId } } }), 200);
  check(after.data.unreadCount === 0, "nothing unread after the receipt");

  step("file: presign, PUT the bytes, register, attach, read back");
  const bytes = Buffer.from(`typed walk ${tag}\n`, "utf8");
  const presigned = expectOk("presign", await coach.api.POST("/api/files/presign", {
    body: { filename: "walk.txt", mimeType: "text/plain", sizeBytes: bytes.length },
  }), 200);
  // The presigned URL is storage's, not the API's: a plain PUT with the headers it names.
  const put = await fetchStorage(presigned.data.presignedUrl, {
    method: "PUT", body: bytes, headers: { ...presigned.data.uploadHeaders },
  });
  check(put.ok, `PUT to the presigned URL: ${put.status}`);
  const registered = expectOk("register", await coach.api.POST("/api/files/register", {
    body: { storageKey: presigned.data.storageKey, filename: "walk.txt", mimeType: "text/plain",
      sizeBytes: bytes.length },
  }), 201);
  const fileId = registered.data.fileId;
  const attached = expectOk("attach", await coach.api.POST("/api/files/{fileId}/attach", {
    params: { path: { fileId } }, body: { objectType: "mentorship", objectId: mentorshipId },
  }), 201);
  check(attached.data.fileId === fileId && attached.data.objectId === mentorshipId, "attached");
  const file = expectOk("get file", await teacher.api.GET("/api/files/{fileId}", {
    params: { path: { fileId } },
  }), 200);
  const sha = createHash("sha256").update(bytes).digest("hex");
  check(file.data.sizeBytes === bytes.length && file.data.sha256Hash === sha &&
    file.data.filename === "walk.txt", "the file's record");
  const url = file.data.presignedUrl;
  if (url === null) throw new ContractError("the file's record has no download URL");
  const got = await fetchStorage(url);
  check(got.ok && Buffer.from(await got.arrayBuffer()).equals(bytes), "the bytes read back");
  const list = expectOk("attachments", await teacher.api.GET(
    "/api/files/mentorship/{mentorshipId}/attachments", { params: { path: { mentorshipId } } }),
  200);
  check(list.data.length === 1 && list.data[0]?.fileId === fileId, "the mentorship's attachment");

  console.log(`walk done in ${Date.now() - started} ms: ${contract.seen.size} operation+status ` +
    "pairs checked against the document");
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.exit(1);
});
