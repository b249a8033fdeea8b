// The SDK's 0.3 line (@a2a-js/sdk 0.3.x, A2A v0.3: message/send, tasks
// with a kind, nested push configs) as a client of every method of
// Agent-Reach's A2A face; the jobs behind the tasks run at an agent built
// with the 1.x SDK and registered by its card.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { A2AClient, ClientFactory } from 'a2a-sdk-v03/client';

import { base, gate, job, jobEvents, receiver, register, startAgent, unique, waitFor } from './harness.mjs';

console.info = () => {}; // the SDK's push sender says every push it sends

const ns = `jsv03-${unique()}`;
const gates = new Map();
let agent, client, hook;

const hold = () => {
  const name = `g-${unique()}`;
  gates.set(name, gate());
  return { name, open: () => gates.get(name).open() };
};

before(async () => {
  agent = await startAgent({
    name: 'JS v03 Calc',
    skills: ['v03.add', 'v03.hold'],
    work: async (input, ctx) => {
      if (ctx.metadata?.skill === 'v03.hold') {
        await gates.get(input.gate).opened;
      }
      return { data: { sum: (input.a ?? 0) + (input.b ?? 0) } };
    },
  });
  await register(agent, ns, 'js-v03-calc', 'v03.add');
  hook = await receiver();
  client = await A2AClient.fromCardUrl(`${base}/a2a/${ns}/.well-known/agent-card.json`);
});

after(async () => {
  await agent?.close();
  await hook?.close();
});

const message = (skill, data, configuration, messageId = `m-${unique()}`) => ({
  message: { kind: 'message', messageId, role: 'user', parts: [{ kind: 'data', data }] },
  metadata: { skill },
  configuration,
});

/** The result of a JSON-RPC answer, failing on an error. */
const ok = (resp) => {
  assert.equal(resp.error, undefined, JSON.stringify(resp.error));
  return resp.result;
};

test('message/send, blocking: a v0.3 task, completed, with the agent\'s result', async () => {
  const t = ok(await client.sendMessage(message('v03.add', { a: 1, b: 2 })));
  assert.equal(t.kind, 'task');
  assert.equal(t.status.state, 'completed');
  assert.deepEqual(t.artifacts[0].parts[0], { kind: 'data', data: { sum: 3 } });
});

test('message/send, non-blocking, then tasks/get until it ends; errors in v0.3 codes', async () => {
  const h = hold();
  const t = ok(await client.sendMessage(message('v03.hold', { gate: h.name, a: 5, b: 5 }, { blocking: false })));
  assert.ok(['submitted', 'working'].includes(t.status.state), t.status.state);
  h.open();
  const done = await waitFor('tasks/get to read it completed', async () => {
    const got = ok(await client.getTask({ id: t.id }));
    return got.status.state === 'completed' && got;
  });
  assert.deepEqual(done.artifacts[0].parts[0].data, { sum: 10 });
  assert.equal((await client.getTask({ id: '0190f1c2-0000-7000-8000-000000000000' })).error.code, -32001);
  const nobody = await client.sendMessage(message('v03.nobody', {}));
  assert.equal(nobody.error.code, -32602);
  assert.match(JSON.stringify(nobody.error), /offers the skill/);
});

test('message/stream and tasks/resubscribe: v0.3 tasks at every change, until the task ends', async () => {
  const h = hold();
  const states = [];
  for await (const ev of client.sendMessageStream(message('v03.hold', { gate: h.name, a: 2, b: 2 }))) {
    assert.equal(ev.kind, 'task', JSON.stringify(ev));
    states.push(ev.status.state);
    h.open();
    if (ev.status.state === 'completed') {
      assert.deepEqual(ev.artifacts[0].parts[0].data, { sum: 4 });
    }
  }
  assert.equal(states.at(-1), 'completed', states.join());

  const h2 = hold();
  const t = ok(await client.sendMessage(message('v03.hold', { gate: h2.name, a: 3, b: 3 }, { blocking: false })));
  const resub = [];
  for await (const ev of client.resubscribeTask({ id: t.id })) {
    assert.equal(ev.kind, 'task');
    resub.push(ev.status.state);
    h2.open();
  }
  assert.equal(resub.at(-1), 'completed');
  const ended = [];
  for await (const ev of client.resubscribeTask({ id: t.id })) {
    ended.push(ev);
  }
  assert.equal(ended.length, 1, 'a v0.3 resubscribe to a task that ended gets it once');
  assert.equal(ended[0].status.state, 'completed');
});

test('tasks/cancel', async () => {
  const h = hold();
  const t = ok(await client.sendMessage(message('v03.hold', { gate: h.name }, { blocking: false })));
  await waitFor('the agent to hold the job', async () => (await job(t.id)).status === 'DELIVERED');
  assert.equal(ok(await client.cancelTask({ id: t.id })).status.state, 'canceled');
  assert.equal((await client.cancelTask({ id: t.id })).error.code, -32002);
});

test('tasks/pushNotificationConfig set, get, list, delete on a running task; the push is the v0.3 task', async () => {
  const h = hold();
  const t = ok(await client.sendMessage(message('v03.hold', { gate: h.name, a: 7, b: 1 }, { blocking: false })));
  await waitFor('the agent to hold the job', async () => (await job(t.id)).status === 'DELIVERED');
  const set = ok(await client.setTaskPushNotificationConfig({
    taskId: t.id, pushNotificationConfig: { id: 'v03', url: hook.url('/v03'), token: 'tok-v03', authentication: { schemes: ['Basic'], credentials: 'dTpw' } },
  }));
  assert.deepEqual(set, { taskId: t.id, pushNotificationConfig: { id: 'v03', url: hook.url('/v03'), token: 'tok-v03', authentication: { schemes: ['Basic'] } } });
  ok(await client.setTaskPushNotificationConfig({ taskId: t.id, pushNotificationConfig: { id: 'gone', url: hook.url('/gone') } }));
  const got = ok(await client.getTaskPushNotificationConfig({ id: t.id, pushNotificationConfigId: 'v03' }));
  assert.equal(got.pushNotificationConfig.url, hook.url('/v03'));
  assert.deepEqual(ok(await client.listTaskPushNotificationConfig({ id: t.id })).map((c) => c.pushNotificationConfig.id), ['v03', 'gone']);
  assert.equal(ok(await client.deleteTaskPushNotificationConfig({ id: t.id, pushNotificationConfigId: 'gone' })), null);
  assert.deepEqual(ok(await client.listTaskPushNotificationConfig({ id: t.id })).map((c) => c.pushNotificationConfig.id), ['v03']);

  h.open();
  await waitFor('the callback acknowledged', async () => (await job(t.id)).callback?.acknowledged);
  const pushes = hook.got.filter((r) => r.path === '/v03');
  assert.equal(pushes.length, 1);
  assert.equal(pushes[0].headers['content-type'], 'application/json');
  assert.equal(pushes[0].headers.authorization, 'Basic dTpw');
  assert.equal(pushes[0].headers['x-a2a-notification-token'], 'tok-v03');
  assert.equal(pushes[0].body.kind, 'task', 'a v0.3 config is pushed the v0.3 task itself');
  assert.equal(pushes[0].body.id, t.id);
  assert.equal(pushes[0].body.status.state, 'completed');
  assert.deepEqual(pushes[0].body.artifacts[0].parts[0], { kind: 'data', data: { sum: 8 } });
  assert.equal(hook.got.filter((r) => r.path === '/gone').length, 0);
  assert.equal((await jobEvents(t.id)).at(-1).type, 'CALLBACK_DELIVERED');
});

test('agent/getAuthenticatedExtendedCard, by the 0.3 line\'s Client', async () => {
  const card = await (await fetch(`${base}/a2a/${ns}/.well-known/agent-card.json`)).json();
  assert.equal(card.supportsAuthenticatedExtendedCard, true);
  const c = await new ClientFactory().createFromAgentCard(card);
  const extended = await c.getAgentCard();
  assert.equal(extended.name, `Agent-Reach (${ns})`);
  assert.equal(extended.url, `${base}/a2a/${ns}`);
  assert.deepEqual(extended.skills.map((s) => s.id), ['v03.add', 'v03.hold']);
});
