/**
 * The real Agent-Reach service for the tests: the binary AGENTREACH_BIN (else
 * ../../bin/agentreach), a fresh PostgreSQL database per test file (created and
 * dropped with psql against PGTEST_ADMIN_URL), `agentreach serve` on a free
 * port of 127.0.0.1 with a small pool, ready once /readyz answers 200. As
 * sdk/python/tests/conftest.py does. Every address is on 127.0.0.1.
 */

import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, unlinkSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
/** sdk/typescript, from dist-test/test. */
export const SDK_DIR = resolve(HERE, "..", "..");
export const REPO = resolve(SDK_DIR, "..", "..");
const LOGS = join(REPO, "build", "ts-test-logs");
const ADMIN_URL = process.env.PGTEST_ADMIN_URL || "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable";
/** The service's pool: small, since the PostgreSQL server is shared. */
const MAX_CONNS = process.env.TS_TEST_AGENTREACH_MAX_CONNS || "6";

function psql(sql: string): void {
  execFileSync("psql", [ADMIN_URL, "-v", "ON_ERROR_STOP=1", "-qAtc", sql], { stdio: ["ignore", "ignore", "pipe"] });
}

function dbUrl(name: string): string {
  const u = new URL(ADMIN_URL);
  u.pathname = "/" + name;
  return u.toString();
}

/** A free TCP port of 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
  });
}

/** A unique name with a prefix. */
export function unique(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString("hex")}`;
}

/** Polls `cond` until it answers something truthy, within `timeoutMs`. */
export async function waitUntil<T>(cond: () => T | Promise<T>, what = "the condition", timeoutMs = 15_000): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const got = await cond();
    if (got) return got as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** One running service on its own database. */
export class Service {
  constructor(
    readonly url: string,
    readonly db: string,
    readonly proc: ChildProcess,
    readonly log: string,
    readonly adminKey?: string,
  ) {}

  /** A raw request with the admin key, for what the SDK does not wrap. */
  async api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const headers: Record<string, string> = {};
    if (this.adminKey) headers.Authorization = `Bearer ${this.adminKey}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const r = await fetch(this.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* text */
    }
    return { status: r.status, body: parsed };
  }

  /** Waits until the registry routes to the agent (HEALTHY). */
  async healthy(agentId: string, namespace?: string, timeoutMs = 15_000): Promise<void> {
    const q = namespace ? `?namespace=${encodeURIComponent(namespace)}` : "";
    await waitUntil(async () => {
      const r = await this.api("GET", `/v1/agents/${encodeURIComponent(agentId)}${q}`);
      return r.status === 200 && r.body?.state === "HEALTHY";
    }, `${agentId} to be HEALTHY`, timeoutMs);
  }

  logTail(n = 40): string {
    try {
      return readFileSync(this.log, "utf8").split("\n").slice(-n).join("\n");
    } catch {
      return "";
    }
  }
}

/** The service's binary. */
export function binary(): string {
  const bin = process.env.AGENTREACH_BIN || join(REPO, "bin", "agentreach");
  if (!existsSync(bin)) throw new Error(`no service binary at ${bin}: run \`make build\` in ${REPO} (or set AGENTREACH_BIN)`);
  return bin;
}

/** Starts the service on a fresh database; with `adminKey`, authentication is on (else --insecure). */
export async function startService(opts: { adminKey?: string; extra?: string[] } = {}): Promise<Service> {
  const bin = binary();
  const db = "agentreach_ts_" + randomBytes(6).toString("hex");
  psql(`CREATE DATABASE "${db}"`);
  const port = await freePort();
  mkdirSync(LOGS, { recursive: true });
  const log = join(LOGS, `${db}.log`);
  const args = [
    "serve",
    "--addr", `127.0.0.1:${port}`,
    "--database-url", dbUrl(db),
    "--max-conns", MAX_CONNS,
    "--deadline-sweep-interval", "200ms",
    "--lost-after", "2s",
    "--claim-timeout", "3s",
    "--log-level", "warn",
    ...(opts.extra ?? []),
    ...(opts.adminKey ? ["--admin-key", opts.adminKey] : ["--insecure"]),
  ];
  const fd = openSync(log, "w");
  const proc = spawn(bin, args, { stdio: ["ignore", fd, fd] });
  closeSync(fd);
  const svc = new Service(`http://127.0.0.1:${port}`, db, proc, log, opts.adminKey);
  const end = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) {
      const tail = svc.logTail();
      await stopService(svc);
      throw new Error(`the service exited with ${proc.exitCode}:\n${tail}`);
    }
    try {
      const r = await fetch(svc.url + "/readyz", { signal: AbortSignal.timeout(2000) });
      await r.arrayBuffer();
      if (r.status === 200) return svc;
    } catch {
      /* not yet */
    }
    if (Date.now() > end) {
      const tail = svc.logTail();
      await stopService(svc);
      throw new Error(`the service was not ready within 60 s:\n${tail}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Stops the service and drops its database (and its log, unless KEEP_TEST_LOGS is set). */
export async function stopService(svc: Service): Promise<void> {
  if (svc.proc.exitCode === null && svc.proc.signalCode === null) {
    const exited = new Promise<void>((r) => svc.proc.once("exit", () => r()));
    svc.proc.kill("SIGTERM");
    const t = setTimeout(() => svc.proc.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(t);
  }
  try {
    psql(`DROP DATABASE IF EXISTS "${svc.db}" WITH (FORCE)`);
  } catch {
    /* best effort */
  }
  if (!process.env.KEEP_TEST_LOGS) {
    try {
      unlinkSync(svc.log);
    } catch {
      /* gone */
    }
  }
}
