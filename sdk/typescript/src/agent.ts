/**
 * A push agent: Agent-Reach POSTs each attempt to its endpoint.
 *
 * ```ts
 * const agent = new Agent({ agentId: "ocr-1", maxConcurrent: 4 });
 * agent.handle("document.ocr", async (job) => ({ text: "..." }));
 * await agent.listen(8001);           // or mount agent.requestListener / agent.fetch
 * ```
 *
 * The endpoint answers `GET` (the registry's probe) with 200 and `POST` (a
 * delivery, or a cancel notice with `X-Reach-Cancel: 1`) after checking its
 * Standard Webhooks signature, keyed with the SHA-256 of the agent's token. A
 * `POST` carrying `X-Reach-Grant` is a direct call by a caller that looked the
 * agent up: its invocation grant is checked instead, and it is answered inline.
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { AgentBase, type AgentOptions, type Route } from "./agentbase.js";
import { SignatureError } from "./errors.js";
import { within } from "./transport.js";
import { GRANT_HEADER, verifyGrant } from "./grant.js";
import { header, verifyDelivery, type HeaderSource } from "./signing.js";
import { parseDelivery, type Delivery } from "./types.js";
import type { JobContext } from "./context.js";

/** The largest delivery read. */
export const MAX_BODY = 16 << 20;

const NO_RESULT_URL = "a direct call is answered inline: there is no result_url to report to";

/** Options of a push {@link Agent}. */
export interface PushAgentOptions extends AgentOptions {
  /** The URL Agent-Reach delivers to. {@link Agent.listen} defaults it to where it listens; mounted in another server, pass where. */
  endpoint?: string;
  /** Where the registry probes the agent (default: the endpoint). */
  healthUrl?: string;
  /** Check every delivery's signature and every direct call's grant (default; turn off only in tests). */
  verifySignatures?: boolean;
}

/** An answer to a request at the endpoint, independent of the server that carries it. */
export interface EndpointAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function answer(status: number, body?: unknown, retryAfter?: number): EndpointAnswer {
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  if (retryAfter !== undefined) headers["Retry-After"] = String(retryAfter);
  return { status, headers, body: body === undefined ? "" : JSON.stringify(body) };
}

/** A push agent: serves deliveries over HTTP, registers, heartbeats, goes offline on shutdown. */
export class Agent extends AgentBase {
  protected readonly mode = "push" as const;
  private endpointUrl?: string;
  private readonly verify: boolean;
  private server?: Server;
  private readonly background = new Set<Promise<void>>();

  constructor(opts: PushAgentOptions) {
    super({ ...opts, metadata: { cancel_notices: true, ...(opts.metadata ?? {}) } });
    this.endpointUrl = opts.endpoint;
    this.verify = opts.verifySignatures ?? true;
  }

  /** The URL registered for deliveries. */
  get endpoint(): string | undefined {
    return this.endpointUrl;
  }

  protected override registration(): Record<string, unknown> {
    const body = super.registration();
    if (!this.endpointUrl) throw new TypeError("a push agent needs its endpoint: pass endpoint (where its handler is mounted)");
    body.endpoint = this.endpointUrl;
    const o = this.opts as PushAgentOptions;
    if (o.healthUrl) body.health_url = o.healthUrl;
    return body;
  }

  // --- life ---------------------------------------------------------------

  /** Starts registering and heartbeating; answers at once. Serve {@link requestListener} (or {@link fetch}) at {@link endpoint} meanwhile. */
  start(): void {
    if (!this.endpointUrl) throw new TypeError("a push agent needs its endpoint: pass endpoint (where its handler is mounted)");
    this.open();
  }

  /**
   * Serves deliveries on `host:port` (port 0: a free one) with `node:http`,
   * then starts the agent; answers the endpoint once the server listens (call
   * {@link waitRegistered} to wait for the registration).
   */
  async listen(port = 0, host = "127.0.0.1"): Promise<string> {
    const server = createServer(this.requestListener);
    server.keepAliveTimeout = 65_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.server = server;
    if (!this.endpointUrl) {
      const bound = (server.address() as AddressInfo).port;
      const shown = host === "0.0.0.0" || host === "" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
      this.endpointUrl = `http://${shown}:${bound}/`;
    }
    try {
      this.start();
    } catch (err) {
      this.server = undefined;
      await new Promise<void>((resolve) => server.close(() => resolve()));
      throw err;
    }
    return this.endpointUrl;
  }

  /** Goes offline (no new work), waits for the jobs held up to `shutdownGraceMs`, stops heartbeating, and closes the server {@link listen} opened. */
  async stop(): Promise<void> {
    if (!this.started || this.stopping) return;
    this.stopping = true;
    await this.offline();
    await this.drain(this.opts.shutdownGraceMs ?? 30_000);
    await within(Promise.allSettled([...this.background]), 5000);
    await this.closeLife();
    if (this.server) {
      const s = this.server;
      this.server = undefined;
      await new Promise<void>((resolve) => {
        s.close(() => resolve());
        s.closeAllConnections();
      });
    }
  }

  // --- serving ------------------------------------------------------------

  /** The `node:http` request listener: `http.createServer(agent.requestListener)`, or Express middleware. */
  readonly requestListener = (req: IncomingMessage, res: ServerResponse): void => {
    void this.serveNode(req, res);
  };

  private async serveNode(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body: Buffer;
    const method = req.method ?? "GET";
    const pre = (req as IncomingMessage & { body?: unknown }).body;
    if (method === "POST" && Buffer.isBuffer(pre)) {
      body = pre; // a raw body parser (express.raw) already read it
    } else if (method === "POST" && typeof pre === "string") {
      body = Buffer.from(pre, "utf8");
    } else if (method === "POST" && pre !== undefined && req.readableEnded) {
      send(res, answer(400, { error: "the body was parsed before the agent read it: mount express.raw({type: '*/*'}) or nothing before the agent" }));
      return;
    } else {
      const chunks: Buffer[] = [];
      let n = 0;
      try {
        for await (const chunk of req) {
          n += (chunk as Buffer).length;
          if (n > MAX_BODY) {
            send(res, answer(413, { error: "delivery too large" }));
            req.destroy();
            return;
          }
          chunks.push(chunk as Buffer);
        }
      } catch {
        return;
      }
      body = Buffer.concat(chunks);
    }
    const hangup = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) hangup.abort();
    });
    const out = await this.serve(method, req.headers, body, hangup.signal);
    send(res, out);
  }

  /** A web-standard handler (`Request` → `Response`), for Hono, Bun, Deno or any fetch-style server. */
  readonly fetch = async (request: Request): Promise<Response> => {
    const body = Buffer.from(await request.arrayBuffer());
    if (body.length > MAX_BODY) return toResponse(answer(413, { error: "delivery too large" }));
    return toResponse(await this.serve(request.method, request.headers, body, request.signal));
  };

  /**
   * Answers one request at the endpoint: the probe, a delivery, a cancel
   * notice or a direct call. `hangup` aborts when the caller hangs up (then an
   * inline handler's context ends as `disconnected`).
   */
  async serve(method: string, headers: HeaderSource, body: Buffer, hangup?: AbortSignal): Promise<EndpointAnswer> {
    if (method === "GET" || method === "HEAD") return answer(200, { status: "ok", agent_id: this.agentId });
    if (method !== "POST") return answer(405, { error: "method not allowed" });
    const grant = header(headers, GRANT_HEADER);
    if (this.verify && !grant) {
      const tokens = this.signingTokens();
      if (!tokens.length) return answer(401, { error: "signature does not verify: the agent is not registered yet" });
      try {
        verifyDelivery(tokens, body, headers);
      } catch (err) {
        this.log(`refused a delivery to ${this.agentId}: ${(err as Error).message}`);
        return answer(401, { error: (err as Error).message });
      }
    }
    let d: Delivery;
    try {
      d = parseDelivery(JSON.parse(body.toString("utf8")), header(headers, "traceparent"), Boolean(grant));
    } catch (err) {
      return answer(400, { error: `bad delivery: ${(err as Error).message}` });
    }
    if (grant && this.verify) {
      try {
        verifyGrant(this.signingTokens(), grant, this.agentId, d.capability);
      } catch (err) {
        if (!(err instanceof SignatureError)) throw err;
        this.log(`refused a direct call to ${this.agentId}: ${err.message}`);
        return answer(401, { error: err.message });
      }
    }
    if (header(headers, "x-reach-cancel") === "1") {
      this.cancelJob(d.jobId, d.attempt || undefined);
      return answer(200, { cancelled: true });
    }
    return this.deliver(d, hangup);
  }

  private async deliver(d: Delivery, hangup?: AbortSignal): Promise<EndpointAnswer> {
    const route = this.route(d.capability);
    if (!route) return answer(404, { error: `this agent serves no ${JSON.stringify(d.capability)}` });
    if (this.stopping || !this.started) return answer(503, { error: "the agent is shutting down" }, 1);
    if (this.maxConcurrent && this.inFlight >= this.maxConcurrent) {
      // "Not now": Agent-Reach pauses the agent a second, counting no failure.
      return answer(503, { error: "the agent is at max_concurrent" }, 1);
    }
    if (route.accept && d.direct) return answer(501, { error: NO_RESULT_URL });
    const ctx = this.newContext(d);
    this.hold(ctx);
    if (route.accept) {
      const p = this.runAccepted(route, ctx);
      this.background.add(p);
      void p.finally(() => this.background.delete(p));
      return answer(202, { accepted: true });
    }
    const onHangup = () => ctx.cancel("disconnected");
    hangup?.addEventListener("abort", onHangup, { once: true });
    try {
      const outcome = await this.runHandler(route, ctx);
      if (outcome.kind === "result" && outcome.result) return answer(200, outcome.result);
      if (outcome.kind === "refused") return answer(503, { error: "refused" });
      if (outcome.kind === "ended") return answer(503, { error: `the job's context ended: ${ctx.cancelReason}` });
      return answer(500, { error: `handler failed: ${errorName(outcome.error)}` });
    } finally {
      hangup?.removeEventListener("abort", onHangup);
      this.releaseHold(ctx);
    }
  }

  private async runAccepted(route: Route, ctx: JobContext): Promise<void> {
    try {
      const outcome = await this.runHandler(route, ctx, true);
      if (outcome.kind === "result" && outcome.result) await this.reportQuietly(ctx, outcome.result);
      else if (outcome.kind === "error" || outcome.kind === "refused") {
        // No way to fail an accepted attempt but its deadline: it times out and is retried.
        this.log(`job ${ctx.jobId} attempt ${ctx.attempt} accepted but not done (${outcome.kind}); it will time out`);
      }
    } finally {
      this.releaseHold(ctx);
    }
  }
}

function errorName(err: unknown): string {
  return err instanceof Error ? err.name : typeof err;
}

function send(res: ServerResponse, a: EndpointAnswer): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(a.status, { ...a.headers, "Content-Length": String(Buffer.byteLength(a.body)) });
  res.end(a.body);
}

function toResponse(a: EndpointAnswer): Response {
  return new Response(a.status === 204 || !a.body ? null : a.body, { status: a.status, headers: a.headers });
}
