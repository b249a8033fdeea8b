// The official MCP TypeScript SDK's client against Agent-Reach's MCP face:
// it lists the namespace's capabilities as tools (with the registered input
// schema) and calls one, inline and as a task (the SDK's experimental
// 2025-11-25 tasks: params.task, tasks/get, tasks/result). The agent that
// serves the calls is a plain push agent registered over REST. Everything
// listens on 127.0.0.1 only; waits are on a condition with a deadline.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { randomUUID } from 'node:crypto';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { base, rest, waitFor } from './harness.mjs';

// adder is a push agent that answers {sum: a + b} at once.
async function adder(capability) {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET') return res.writeHead(200).end();
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const env = JSON.parse(raw);
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ status: 'SUCCESS', result: { sum: env.payload.a + env.payload.b } }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const id = 'mcpjs-' + randomUUID().slice(0, 8);
  const schema = { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] };
  const reg = await rest('POST', '/v1/agents', {
    agent_id: id, capabilities: [capability], endpoint: `http://127.0.0.1:${server.address().port}/`, ttl_seconds: 60,
    capability_info: { [capability]: { description: 'Adds a and b.', input_schema: schema } },
  });
  assert.equal(reg.status, 201, JSON.stringify(reg.body));
  await waitFor('the agent HEALTHY', async () => (await rest('GET', '/v1/agents/' + id)).body.state === 'HEALTHY');
  return { server, schema };
}

async function connect() {
  const client = new Client({ name: 'agentreach-mcp-suite', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(base + '/mcp/default')));
  return client;
}

test('the SDK client lists a capability as a tool and calls it inline', async () => {
  const capability = 'mcpjs.add-' + randomUUID().slice(0, 8);
  const { server, schema } = await adder(capability);
  const client = await connect();
  try {
    const tool = await waitFor('the tool listed', async () => (await client.listTools()).tools.find((t) => t.name === capability));
    assert.equal(tool.description, 'Adds a and b.');
    assert.deepEqual(tool.inputSchema, schema);
    const res = await client.callTool({ name: capability, arguments: { a: 2, b: 3 } });
    assert.equal(res.isError ?? false, false);
    assert.deepEqual(res.structuredContent, { sum: 5 });
    assert.equal(res.content[0].type, 'text');
  } finally {
    await client.close();
    server.close();
  }
});

test('the SDK client calls a tool as a task and gets its result', async () => {
  const capability = 'mcpjs.add-' + randomUUID().slice(0, 8);
  const { server } = await adder(capability);
  const client = await connect();
  try {
    await waitFor('the tool listed', async () => (await client.listTools()).tools.some((t) => t.name === capability));
    const seen = [];
    let result;
    const stream = client.experimental.tasks.callToolStream({ name: capability, arguments: { a: 20, b: 22 } }, undefined, { task: { ttl: 60000 } });
    for await (const message of stream) {
      seen.push(message.type);
      if (message.type === 'taskCreated') {
        // The task is the job: REST shows it at once.
        const job = await rest('GET', '/v1/jobs/' + message.task.taskId);
        assert.equal(job.status, 200, JSON.stringify(job.body));
        assert.equal(job.body.capability, capability);
      }
      if (message.type === 'error') throw message.error;
      if (message.type === 'result') result = message.result;
    }
    assert.equal(seen[0], 'taskCreated', seen.join(','));
    assert.deepEqual(result.structuredContent, { sum: 42 });
  } finally {
    await client.close();
    server.close();
  }
});

test('a call of a tool that is not there is refused', async () => {
  const client = await connect();
  try {
    await assert.rejects(client.callTool({ name: 'no.such.tool', arguments: {} }), /no tool "no.such.tool"/);
  } finally {
    await client.close();
  }
});
