/**
 * Express adapter: a push agent's endpoint as middleware (express is not a
 * dependency: its types only).
 *
 * ```ts
 * app.post("/agent", agentMiddleware(agent));   // before any body parser, or after express.raw()
 * app.get("/agent", agentMiddleware(agent));    // the registry's probe
 * ```
 */

import type { NextFunction, Request, RequestHandler, Response } from "express";
import type { Agent } from "./agent.js";

/** Middleware that answers every request it gets as the agent's endpoint. */
export function agentMiddleware(agent: Agent): RequestHandler {
  return (req: Request, res: Response, _next: NextFunction) => agent.requestListener(req, res);
}
