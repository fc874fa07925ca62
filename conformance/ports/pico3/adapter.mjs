// The TypeScript pico3 (npm @earendil-works/pi-agent-core@0.87.1, subpath
// experimental/pico3) as a conformance port: it speaks the kit's protocol
// (fixtures/README.md) on stdin and stdout over pico3's public API.
//
// The package is installed outside the repository (shared/peer/README.md);
// PICO3_DIR names the directory whose node_modules holds it:
//
//   PICO3_DIR=/tmp/pico3-peer picosim conform --port 'node conformance/ports/pico3/adapter.mjs'
//
// What pico3 cannot express answers "unsupported"; where its shapes differ
// from the reference's (namespaced kinds, task statuses, input statuses)
// the adapter maps them, and conformance/ports/pico3/README.md lists what
// still differs, with a verdict each.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const dir = process.env.PICO3_DIR;
if (!dir || !existsSync(join(dir, "node_modules/@earendil-works/pi-agent-core"))) {
  process.stderr.write("pico3 adapter: set PICO3_DIR to the directory where @earendil-works/pi-agent-core@0.87.1 is installed\n");
  process.exit(2);
}

// resolve imports a package's subpath export from PICO3_DIR.
async function resolve(pkg, sub) {
  const root = join(dir, "node_modules", pkg);
  const exp = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).exports[sub];
  const file = typeof exp === "string" ? exp : exp.import ?? exp.default;
  return import(pathToFileURL(join(root, file)).href);
}
const { Harness, JsonlStorage } = await resolve("@earendil-works/pi-agent-core", "./experimental/pico3");
const { BACKGROUND_CONTEXT: ctx } = await resolve("@earendil-works/chord", "./context");

const zero = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
const MODEL = { id: "faux-1", name: "Faux", api: "faux", provider: "faux", baseUrl: "", reasoning: false, input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 200000, maxTokens: 8192 };

// fauxModels plays the scenario's responses in order (the reference faux
// provider, §3 of delta-and-messages.md): four characters a token.
// nth is the index a line's number picks among length things, as the
// script package's Nth: modulo length, a negative one from the end.
const nth = (arg, length) => ((Number(arg) % length) + length) % length;

function fauxModels(responses) {
  const queue = [...responses];
  const usage = (text) => { const out = Math.ceil(text.length / 4); return { ...zero, output: out, totalTokens: out }; };
  const message = (content, stopReason, extra = {}) => ({ role: "assistant", content, api: MODEL.api, provider: MODEL.provider, model: MODEL.id,
    usage: usage(content.map((b) => b.text ?? JSON.stringify(b.arguments ?? {})).join("")), stopReason, timestamp: 0, ...extra });
  const answer = (r) => {
    switch (r?.kind) {
      case "text": return message([{ type: "text", text: r.text }], "stop");
      case "calls": return message(r.calls.map((c) => ({ type: "toolCall", id: c.id, name: c.name, arguments: c.arguments })), "toolUse");
      case "rate-limited": return message([], "error", { errorMessage: "rate limited (429)" });
      case "overflow": return message([], "error", { errorMessage: "prompt is too long: context window exceeded" });
      case "fail": return message([], "error", { errorMessage: "the provider refused" });
      case "aborted": return message([{ type: "text", text: "cut" }], "aborted");
      case undefined: return message([], "error", { errorMessage: "faux: no response queued" });
    }
    return undefined;
  };
  let deferred = 0;
  return {
    resolve: () => MODEL,
    async *stream() {
      const r = queue.shift();
      const partial = { ...message([], "stop"), usage: zero };
      yield { type: "start", partial };
      if (r?.kind === "deferred") {
        deferred++;
        const handle = { provider: MODEL.provider, modelId: MODEL.id, api: MODEL.api, id: `faux-deferred-${deferred}`, pollAfterMs: 1 };
        yield { type: "done", reason: "deferred", message: { ...partial, stopReason: "deferred", deferred: handle } };
        return;
      }
      const m = answer(r);
      if (m.stopReason === "error" || m.stopReason === "aborted") { yield { type: "error", reason: m.stopReason, error: m }; return; }
      m.content.forEach((b, i) => {
        partial.content.push(b);
      });
      for (const [i, b] of m.content.entries()) {
        if (b.type === "text") { yield { type: "text_start", contentIndex: i, partial }; yield { type: "text_end", contentIndex: i, content: b.text, partial }; }
        else { yield { type: "toolcall_start", contentIndex: i, partial }; yield { type: "toolcall_end", contentIndex: i, toolCall: b, partial }; }
      }
      yield { type: "done", reason: m.stopReason, message: m };
    },
    async fetchDeferred() { const m = answer(queue.shift()); return m; },
    async cancelDeferred() {},
  };
}

const objectSchema = { type: "object" };
const tools = [
  ...["a", "b"].map((name) => ({ name, description: `echo ${name}`, parameters: objectSchema, replay: "safe",
    async execute(args) { return { content: [{ type: "text", text: name + JSON.stringify(args) }] }; } })),
  { name: "work", description: "do as asked", parameters: { type: "object", properties: { do: { type: "string" } } }, replay: "safe",
    async execute(args) {
      const control = {};
      switch (args.do) {
        case "throw": throw new Error("the work failed");
        case "terminate": control.terminate = true; break;
        case "handoff": control.handoff = "start afresh"; break;
        case "addTools": control.addTools = ["b"]; break;
      }
      return { content: [{ type: "text", text: `worked: ${args.do}` }], control };
    } },
];

class Unsupported extends Error {}

// Scenario is one open scenario: a JSONL session (so a reopen finds it),
// the harness, held so that only a drive runs tasks.
class Scenario {
  static async open(req) {
    if (req.swarm?.shell) {
      // pico3 has a job kind over a ProcessHost, but nothing a scenario's
      // processes can reach: its bash tool spawns `bash -c` itself, and
      // neither the host nor a built-in tool creates jobs.
      const bash = (req.responses ?? []).some((r) => (r.calls ?? []).some((c) => c.name === "bash" || c.name === "job"));
      throw new Unsupported(bash
        ? "bashTool spawns `bash -c` through node:child_process: no job, no budget, no delegation, no process host to run the scenario's processes; no job tool"
        : "no host way to start a job (HostTx has no task) and no job tool; the job kind's ProcessHost is only reachable from a tool");
    }
    const s = new Scenario();
    s.dir = mkdtempSync(join(tmpdir(), "pico3-conform-"));
    s.models = fauxModels(req.responses ?? []);
    s.retryMs = req.swarm?.retryMs ?? 1;
    s.convs = [];
    s.inputs = new Map();
    s.actions = [];
    s.watches = [];
    await s.start();
    s.convs.push((await s.h.root(ctx)).id);
    return s;
  }
  async start() {
    this.storage = await JsonlStorage.open(this.dir, { fsync: false });
    this.h = await Harness.open(this.storage, { models: this.models, tools, onReport: () => {},
      root: { rewindable: { model: { provider: MODEL.provider, modelId: MODEL.id }, selectedTools: ["a", "b", "work"], keepRecent: 0 },
        sticky: { retry: { enabled: true, maxRetries: 4, baseDelayMs: this.retryMs } } } }, ctx);
    this.h.resume();
    this.release = this.h.hold();
  }
  // run lets the scheduler run until the session is idle, then holds it
  // again: pico3 runs tasks on its own, so a hold is how "only a drive
  // runs tasks" is kept.
  async run(fn) {
    this.release();
    try { return await fn(); } finally {
      for (;;) {
        await this.h.waitForIdle(ctx);
        try { this.release = this.h.hold(); break; } catch { /* not quiescent yet */ }
      }
    }
  }
  conv(arg) { return this.convs[nth(arg.slice(1), this.convs.length)]; }
  async handle(arg) { return this.h.conversation(this.conv(arg), ctx); }
  remember(conv, id) { if (!this.inputs.has(conv)) this.inputs.set(conv, []); this.inputs.get(conv).push(id); }
  async liveTasks() {
    const root = await this.h.root(ctx);
    return (await root.commit((tx) => tx.tasks({ status: ["pending", "running"] }), ctx)).sort((a, b) => a.id - b.id);
  }

  async act(op, args) {
    switch (op) {
      case "accept": case "followup": case "steer": {
        const c = await this.handle(args[0]);
        const input = { content: args[1] };
        if (op !== "accept") input.whenBusy = op === "steer" ? "steer" : "followUp";
        if (args[2]) input.requestId = args[2].slice(4);
        const ih = await c.send(input, ctx);
        this.remember(c.id, ih.id);
        return { ids: [ih.id] };
      }
      case "next-run": throw new Unsupported("no nextRun mode (send takes whenBusy steer, followUp or reject)");
      case "write": {
        const c = await this.handle(args[0]);
        const id = await c.write({ kind: "pi.notice", data: { text: args[1] } }, ctx);
        this.remember(c.id, id);
        return { ids: [id] };
      }
      case "cancel-queued": {
        const c = await this.handle(args[0]);
        const ins = this.inputs.get(c.id) ?? [];
        if (ins.length === 0) return { result: "no input" };
        const r = await this.h.abortInput(ins[nth(args[1], ins.length)], ctx, c.id);
        return { result: r === "aborted" ? "cancelled" : r };
      }
      // pico3's abort waits for the aborted invocations, which needs the
      // scheduler: the abort runs with it released (and so also drives).
      case "abort": { const c = await this.handle(args[0]); await this.run(() => c.abort(ctx)); return {}; }
      case "abort-task": {
        const live = await this.liveTasks();
        if (live.length === 0) return { result: "no task" };
        const t = live[nth(args[0], live.length)];
        await this.run(() => this.h.abortTask(t.id, ctx));
        return { ids: [t.id] };
      }
      case "fork": {
        if (args.slice(2).includes("abort")) throw new Unsupported("fork has no abort option");
        if (args.slice(2).some((a) => a.startsWith("carry="))) throw new Unsupported("fork carry is not mapped to pico3");
        const c = await this.handle(args[0]);
        const entries = (await this.h.entries({ conversationId: c.id, limit: 100000 }, ctx)).reverse();
        if (entries.length === 0) return { result: "no entry" };
        const f = await c.fork(entries[nth(args[1], entries.length)].id, {}, ctx);
        this.convs.push(f.id);
        return { ids: [f.id] };
      }
      case "watch": {
        const c = await this.handle(args[0]);
        const w = await c.watch(ctx);
        const log = { conv: c.id, w, commits: [], live: true };
        w.start((env) => log.commits.push((env.events ?? [env]).map((e) => e.type + (e.entry ? ` ${e.entry.id}` : e.taskId ? ` ${e.taskId}` : ""))));
        this.watches.push(log);
        return {};
      }
      case "unwatch": {
        const live = this.watches.filter((w) => w.live);
        if (live.length === 0) return { result: "no watch" };
        const w = live[nth(args[0], live.length)];
        w.w.stop(); w.live = false;
        return {};
      }
      case "drive": {
        await this.run(async () => {});
        return { result: "idle" };
      }
      case "reopen": case "shutdown": {
        for (const w of this.watches) w.live = false;
        this.release();
        if (op === "shutdown") await this.h.suspend(ctx); else await this.h.close(ctx);
        await this.start();
        return {};
      }
      case "collapse": {
        const c = await this.handle(args[0]);
        return { ids: [await c.collapse(args[1], ctx)] };
      }
      case "reset": { await (await this.handle(args[0])).reset(undefined, ctx); return {}; }
      case "spawn": throw new Unsupported("no host spawn (children are made by tasks)");
      case "entry": throw new Unsupported("no host commit of an entry with a head (HostTx has write, not entry)");
      case "edit": throw new Unsupported("no host commit of an entry with edits (HostTx has write, not entry)");
      case "job": case "wait-job": throw new Unsupported("no host way to start or wait for a job");
      case "drive-for": throw new Unsupported("drive-for bounds a drive in virtual time; pico3 runs on the wall clock");
    }
    throw new Unsupported(`op ${op}`);
  }

  async action(req) {
    const out = { line: req.line };
    try {
      Object.assign(out, await this.act(req.op, req.args));
    } catch (e) {
      if (e instanceof Unsupported) throw e;
      out.refused = refusal(e);
    }
    this.actions.push(out);
    return out;
  }

  async outcome() {
    const root = await this.h.root(ctx);
    const all = await root.commit(async (tx) => {
      const tasks = await tx.tasks({});
      return { tasks };
    }, ctx);
    const convs = await this.storage.conversations(ctx);
    const usage = [];
    const out = { actions: this.actions, conversations: [], usage, watches: this.watches.map((w) => ({ conversation: w.conv, commits: w.commits })) };
    for (const cv of convs.sort((a, b) => a.id - b.id)) {
      const entries = (await this.h.entries({ conversationId: cv.id, limit: 100000 }, ctx)).reverse();
      const own = entries.filter((e) => e.conversationId === cv.id);
      const c = await this.h.conversation(cv.id, ctx);
      const inputIds = [...new Set(this.inputs.get(cv.id) ?? [])];
      const inputs = [];
      for (const id of inputIds) {
        const r = await root.commit((tx) => tx.input(id), ctx);
        if (r) inputs.push({ id: r.id, status: inputStatus(r), requestId: r.requestId, placement: r.entry, result: r.answer, reason: r.reason });
      }
      const w = await c.watch(ctx);
      const view = w.view;
      w.stop();
      const ctxView = await c.context(ctx);
      out.conversations.push({
        id: cv.id,
        parent: cv.parent ? { conversation: cv.parent.conversationId, at: cv.parent.at || undefined } : undefined,
        owner: cv.owner,
        entries: own.filter((e) => e.kind !== "pi.usage").map(entryOutcome),
        tasks: all.tasks.filter((t) => t.conversationId === cv.id).sort((a, b) => a.id - b.id).map(taskOutcome),
        inputs,
        view: { context: ctxView.entries.map((e) => e.id), inbox: view.inbox.map((q) => q.id), tasks: Object.keys(view.tasks).map(Number), entries: view.entries.slice(-1).map((e) => e.id) },
      });
      for (const e of own.filter((e) => e.kind === "pi.usage")) {
        usage.push({ conversation: cv.id, task: e.byTaskId, kind: "generation", attempt: e.data?.attempt ?? 0, outcome: e.data?.error ? "error" : "done",
          known: e.data?.usage !== undefined, output: e.data?.usage?.output || undefined });
      }
    }
    return out;
  }

  async close() {
    try { this.release(); await this.h.close(ctx); } catch {}
    rmSync(this.dir, { recursive: true, force: true });
  }
}

// refusal names a refused host call the way the kit does.
function refusal(e) {
  const names = { CollapseInProgress: "collapse-in-progress", ConversationBusy: "conversation-busy", Closed: "closed", Forbidden: "forbidden" };
  if (names[e?.name]) return names[e.name];
  const msg = String(e?.message ?? e);
  if (/nothing to collapse/i.test(msg)) return "nothing-to-collapse";
  return msg;
}

// kind maps pico3's namespaced kinds to the reference's names.
const kind = (k) => (k.startsWith("pi.") ? k.slice(3).replace("postTools", "post_tools") : k);

function inputStatus(r) {
  if (r.status === "unanswered") return r.reason === "aborted" ? "cancelled" : r.reason === "failed" ? "failed" : "stopped";
  return r.status;
}

function entryOutcome(e) {
  const out = { id: e.id, kind: kind(e.kind), byTask: e.byTaskId, key: e.model?.[0]?.toolCallId, data: e.data, head: e.head };
  out.model = (e.model ?? []).map((m) => {
    const blocks = typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content ?? [];
    const text = blocks.filter((b) => b.type === "text").map((b) => b.text).join("");
    const calls = blocks.filter((b) => b.type === "toolCall").map((b) => `${b.name}(${b.id})`);
    return { role: m.role, text: text || undefined, calls: calls.length ? calls : undefined, isError: m.isError || undefined };
  });
  if (e.edits) out.edits = e.edits.map((x) => ({ type: x.action, target: x.target }));
  return out;
}

function taskOutcome(t) {
  let status = t.status;
  if (t.status === "terminal") status = { completed: "done", failed: "failed", aborted: "aborted", orphaned: "orphaned", faulted: "faulted" }[t.outcome?.status] ?? "terminal";
  return { id: t.id, kind: kind(t.kind), status, background: t.background || undefined, abort: t.abort || undefined,
    after: t.after?.length ? t.after : undefined, owns: t.owns?.length ? t.owns : undefined,
    reason: t.outcome?.failure?.reason ?? (t.outcome?.status === "aborted" ? "aborted" : undefined) ?? t.input?.reason };
}

// The protocol loop: one reply per request, in order.
const send = (reply) => process.stdout.write(JSON.stringify(reply) + "\n");
let scenario;
const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  let req;
  try { req = JSON.parse(line); } catch (e) { process.stderr.write(`pico3 adapter: not a request: ${line}\n`); process.exit(1); }
  try {
    switch (req.type) {
      case "open":
        if (scenario) await scenario.close();
        scenario = undefined;
        if (req.version !== 1) { send({ ok: false, error: `protocol version ${req.version}: this port speaks 1` }); break; }
        scenario = await Scenario.open(req);
        send({ ok: true });
        break;
      case "action":
        send({ ok: true, action: await scenario.action(req) });
        break;
      case "outcome":
        send({ ok: true, outcome: await scenario.outcome() });
        await scenario.close();
        scenario = undefined;
        break;
      case "close":
        if (scenario) await scenario.close();
        process.exit(0);
      default:
        send({ ok: false, error: `unknown request type ${req.type}` });
    }
  } catch (e) {
    if (e instanceof Unsupported) send({ ok: false, unsupported: e.message });
    else send({ ok: false, error: String(e?.stack ?? e) });
  }
}
if (scenario) await scenario.close();
