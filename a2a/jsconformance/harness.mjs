// The suite's shared pieces: the Agent-Reach under test (AGENTREACH_URL),
// its REST API, A2A agents built with the JavaScript SDK's server and
// registered by their cards, and webhook receivers that keep what is pushed
// to them. Everything listens on 127.0.0.1 only. Waits are on a condition
// with a deadline, never a bare sleep.
import http from 'node:http';
import { randomUUID } from 'node:crypto';

import express from 'express';
import { Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent, Message } from '@a2a-js/sdk';
import {
  AgentEvent,
  DefaultPushNotificationSender,
  DefaultRequestHandler,
  InMemoryPushNotificationStore,
  InMemoryTaskStore,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

/** The service under test. */
export const base = process.env.AGENTREACH_URL;
if (!base) {
  throw new Error('AGENTREACH_URL must name the Agent-Reach under test (cmd/agentreach TestA2AJavaScriptSDK sets it)');
}

/** A unique suffix, so tests sharing one service never meet. */
export const unique = () => randomUUID().slice(0, 8);

/** Calls the REST API and answers {status, body} (body parsed if JSON). */
export async function rest(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: kept as text
  }
  return { status: res.status, body: parsed };
}

/** Waits until cond() answers something truthy, and answers it; fails after within ms. */
export async function waitFor(what, cond, within = 20000) {
  const deadline = Date.now() + within;
  for (;;) {
    const got = await cond();
    if (got) {
      return got;
    }
    if (Date.now() > deadline) {
      throw new Error(`not within ${within} ms: ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50)); // the poll interval while waiting on the condition
  }
}

/** A job as GET /v1/jobs/{id} shows it. */
export async function job(id) {
  const { status, body } = await rest('GET', `/v1/jobs/${id}`);
  if (status !== 200) {
    throw new Error(`GET /v1/jobs/${id}: ${status} ${JSON.stringify(body)}`);
  }
  return body;
}

/** The types of a job's events, in order. */
export async function eventTypes(id) {
  return (await jobEvents(id)).map((e) => e.type);
}

/** A job's events. */
export async function jobEvents(id) {
  const { body } = await rest('GET', `/v1/jobs/${id}/events`);
  return body.events;
}

const terminal = new Set(['SUCCESS', 'FAILED', 'CANCELLED', 'DEAD_LETTER', 'REJECTED']);

/** Waits for a job to end, and answers it. */
export async function ended(id, within = 20000) {
  return waitFor(`job ${id} to end`, async () => {
    const j = await job(id);
    return terminal.has(j.status) && j;
  }, within);
}

/** Listens on 127.0.0.1 (port 0: any), answering the server and its port. */
async function listen(handler, port = 0) {
  const server = http.createServer(handler);
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return { server, port: server.address().port };
}

async function closeServer(server) {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

/** The wire JSON of a message's text or data part, as the SDK's types hold it. */
export const part = (v) => (typeof v === 'string' ? { text: v } : { data: v });

/**
 * Starts an A2A agent built with the SDK's server (DefaultRequestHandler,
 * JSON-RPC over Express, its card at the well-known path) offering skills.
 * work(input, ctx) runs for each new task with the message's data (or
 * text); ctx.taskId, ctx.contextId; it answers {data} or {text} to complete
 * the task, throws an Error to fail it with the error's message, or answers
 * a promise to keep it working until then. push: whether its card offers
 * push notifications (the SDK's own sender then pushes every event).
 * restart() stops it and starts it again on the same port with nothing
 * remembered, as a process that was killed would.
 */
export async function startAgent({ name, skills, push = true, work }) {
  const agent = { name, messages: [], cancels: [] };
  let served;
  const start = async (want) => {
    let app; // bound once the port, which the card names, is known
    const served = await listen((req, res) => app(req, res), want);
    const port = served.port;
    const card = {
      name,
      description: `${name}, an A2A agent built with @a2a-js/sdk`,
      version: '1.0.0',
      supportedInterfaces: [{ url: `http://127.0.0.1:${port}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
      capabilities: { streaming: true, pushNotifications: push, extensions: [], extendedAgentCard: false },
      securitySchemes: {},
      securityRequirements: [],
      defaultInputModes: ['application/json', 'text/plain'],
      defaultOutputModes: ['application/json', 'text/plain'],
      skills: skills.map((id) => ({ id, name: id, description: id, tags: [], examples: [], inputModes: [], outputModes: [], securityRequirements: [] })),
      signatures: [],
      documentationUrl: '',
    };
    const store = push ? new InMemoryPushNotificationStore() : undefined;
    const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor(agent, work), undefined, store,
      store && new DefaultPushNotificationSender(store, { timeout: 5000 }));
    app = express();
    app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
    app.use(jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
    return served;
  };
  served = await start(0);
  agent.port = served.port;
  agent.url = `http://127.0.0.1:${served.port}`;
  agent.restart = async () => {
    await closeServer(served.server);
    served = await start(agent.port);
  };
  agent.close = () => closeServer(served.server);
  return agent;
}

/** The AgentExecutor of startAgent: the task, working, then work's answer. */
function executor(agent, work) {
  const cancelled = new Map(); // taskId → resolve
  return {
    cancelTask: async (taskId, bus) => {
      agent.cancels.push(taskId);
      cancelled.get(taskId)?.();
    },
    execute: async (rc, bus) => {
      const { taskId, contextId } = rc;
      const msg = Message.toJSON(rc.userMessage);
      agent.messages.push(msg);
      const status = (state, text) => TaskStatusUpdateEvent.fromJSON({
        taskId, contextId,
        status: { state, timestamp: new Date().toISOString(), message: text === undefined ? undefined : { messageId: randomUUID(), role: 'ROLE_AGENT', taskId, contextId, parts: [{ text }] } },
      });
      bus.publish(AgentEvent.task(rc.task ?? Task.fromJSON({ id: taskId, contextId, status: { state: 'TASK_STATE_SUBMITTED', timestamp: new Date().toISOString() }, history: [msg] })));
      bus.publish(AgentEvent.statusUpdate(status('TASK_STATE_WORKING')));
      const input = msg.parts?.[0]?.data ?? msg.parts?.[0]?.text;
      const cancel = new Promise((resolve) => cancelled.set(taskId, () => resolve({ cancelled: true })));
      try {
        const out = await Promise.race([work(input, { taskId, contextId, metadata: msg.metadata }), cancel]);
        if (out?.cancelled) {
          bus.publish(AgentEvent.statusUpdate(status('TASK_STATE_CANCELED')));
          return;
        }
        bus.publish(AgentEvent.artifactUpdate(TaskArtifactUpdateEvent.fromJSON({
          taskId, contextId, lastChunk: true,
          artifact: { artifactId: 'result', name: 'result', parts: [out.text !== undefined ? { text: out.text } : { data: out.data }] },
        })));
        bus.publish(AgentEvent.statusUpdate(status('TASK_STATE_COMPLETED')));
      } catch (err) {
        bus.publish(AgentEvent.statusUpdate(status('TASK_STATE_FAILED', err.message)));
      } finally {
        cancelled.delete(taskId);
        bus.finished();
      }
    },
  };
}

/**
 * Registers an agent by its card (POST /v1/agents {card_url}) in namespace
 * ns, and waits until the router chooses it for its first skill.
 */
export async function register(agent, ns, id, skill) {
  const { status, body } = await rest('POST', '/v1/agents', { card_url: agent.url, agent_id: id, namespace: ns, ttl_seconds: 30 });
  if (status !== 201) {
    throw new Error(`register ${id}: ${status} ${JSON.stringify(body)}`);
  }
  await waitFor(`${id} to be chosen for ${skill}`, async () => {
    const r = await rest('GET', `/v1/route?namespace=${ns}&capability=${encodeURIComponent(skill)}`);
    return r.status === 200 && r.body.chosen === id;
  });
  return body;
}

/**
 * A webhook receiver: it keeps every request (headers, body parsed) and
 * answers answer(req) (default 200). url(path) is its address.
 */
export async function receiver(answer = () => 200) {
  const got = [];
  const { server, port } = await listen((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c) => { raw += c; });
    req.on('end', () => {
      let body = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        // kept as text
      }
      const r = { path: req.url, headers: req.headers, body };
      got.push(r);
      res.statusCode = answer(r, got.filter((g) => g.path === req.url).length);
      res.end();
    });
  });
  return { got, url: (path = '/') => `http://127.0.0.1:${port}${path}`, close: () => closeServer(server) };
}

/** A promise and its resolve, to hold an agent's work until a test lets it go. */
export function gate() {
  let open;
  const opened = new Promise((resolve) => { open = resolve; });
  return { opened, open };
}
