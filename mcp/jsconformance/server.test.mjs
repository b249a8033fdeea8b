// An MCP server built with the official MCP TypeScript SDK (McpServer over
// its stateless Streamable HTTP transport) registered as an agent
// ("protocol": "mcp"): its tool becomes a capability, a job submitted over
// REST reaches it as a tools/call, and the tool's result reaches the
// caller's callback. Everything listens on 127.0.0.1 only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { randomUUID } from 'node:crypto';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

import { rest, waitFor } from './harness.mjs';

async function listen(handler) {
  const server = http.createServer(handler);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${server.address().port}` };
}

test('an MCP server built with the SDK takes a job submitted over REST and its result reaches the callback', async () => {
  const tool = 'mcpjs.greet-' + randomUUID().slice(0, 8);
  const calls = [];
  const mcp = await listen(async (req, res) => {
    if (req.headers['x-api-key'] !== 'k3y') return res.writeHead(401).end();
    if (req.method !== 'POST') return res.writeHead(405, { Allow: 'POST' }).end();
    const server = new McpServer({ name: 'greeter', version: '1.0.0' });
    server.registerTool(tool, { description: 'Greets someone.', inputSchema: { name: z.string() } }, async ({ name }) => {
      calls.push(name);
      return { content: [{ type: 'text', text: `hello ${name}` }], structuredContent: { greeting: `hello ${name}` } };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  let resolveCallback;
  const callback = new Promise((resolve) => (resolveCallback = resolve));
  const receiver = await listen((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      res.writeHead(204).end();
      resolveCallback(JSON.parse(raw));
    });
  });
  try {
    const id = 'mcpjs-' + randomUUID().slice(0, 8);
    const reg = await rest('POST', '/v1/agents', { agent_id: id, protocol: 'mcp', endpoint: mcp.url + '/mcp', headers: { 'X-Api-Key': 'k3y' }, ttl_seconds: 30 });
    assert.equal(reg.status, 201, JSON.stringify(reg.body));
    assert.deepEqual(reg.body.capabilities, [tool]);
    assert.ok(!JSON.stringify(reg.body).includes('k3y'), 'the header value is never shown');
    const entry = await rest('GET', '/v1/capabilities/' + tool);
    assert.equal(entry.body.description, 'Greets someone.');
    assert.equal(entry.body.input_schema.properties.name.type, 'string');
    // A job submitted before the agent's first probe answered would find
    // no routable agent and wait for its retry.
    await waitFor('the agent HEALTHY', async () => (await rest('GET', '/v1/agents/' + id)).body.state === 'HEALTHY');

    console.log('submit at', new Date().toISOString());
    const submit = await rest('POST', '/v1/jobs', { capability: tool, payload: { name: 'Ada' }, callback_url: receiver.url + '/done' });
    assert.equal(submit.status, 202, JSON.stringify(submit.body));
    const done = await Promise.race([callback, new Promise((_, reject) => setTimeout(() => reject(new Error('no callback within 20 s')), 20000))]);
    const evs = await rest('GET', '/v1/jobs/' + submit.body.job_id + '/events');
    console.log(JSON.stringify(evs.body.events.map(e => [e.type, e.recorded_at, e.data.reason, e.data.error, e.data.route && e.data.route.rejected])));
    assert.equal(done.job_id, submit.body.job_id);
    assert.equal(done.status, 'SUCCESS');
    assert.deepEqual(done.result, { greeting: 'hello Ada' });
    assert.deepEqual(calls, ['Ada']);
  } finally {
    mcp.server.close();
    receiver.server.close();
  }
});
