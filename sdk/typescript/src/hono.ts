/**
 * Hono adapter: a push agent's endpoint as a route handler (hono is not a
 * dependency: its types only).
 *
 * ```ts
 * app.on(["GET", "POST"], "/agent", agentRoute(agent));
 * ```
 */

import type { Context } from "hono";
import type { Agent } from "./agent.js";

/** A Hono handler that answers the request as the agent's endpoint. */
export function agentRoute(agent: Agent): (c: Context) => Promise<Response> {
  return (c: Context) => agent.fetch(c.req.raw);
}
