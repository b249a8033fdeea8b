// @a2a-js/sdk 1.x, which speaks A2A v1.0 (A2A-Version: 1.0, SendMessage,
// StreamResponse, flat push configs), as a client of every method of
// Agent-Reach's A2A face; the jobs behind the tasks run at an agent built
// with the same SDK and registered by its card.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  DeleteTaskPushNotificationConfigRequest,
  GetTaskPushNotificationConfigRequest,
  ListTaskPushNotificationConfigsRequest,
  SendMessageRequest,
  StreamResponse,
  Task,
  TaskPushNotificationConfig,
} from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';

import { base, ended, gate, job, jobEvents, part, receiver, register, startAgent, unique, waitFor } from './harness.mjs';

console.info = () => {}; // the SDK's push sender says every push it sends

const ns = `jsv1-${unique()}`;
const gates = new Map(); // what a v1.hold task waits for, by its input's gate
let agent, client, hook;

const hold = (name) => {
  const g = gate();
  gates.set(name, g);
  return g;
};

before(async () => {
  agent = await startAgent({
    name: 'JS v1 Calc',
    skills: ['v1.add', 'v1.hold', 'v1.fail'],
    work: async (input, ctx) => {
      const skill = ctx.metadata?.skill;
      if (skill === 'v1.fail') {
        throw new Error('out of paper');
      }
      if (skill === 'v1.hold') {
        await gates.get(input.gate).opened;
      }
      return { data: { sum: (input.a ?? 0) + (input.b ?? 0) } };
    },
  });
  await register(agent, ns, 'js-v1-calc', 'v1.add');
  hook = await receiver();
  client = await new ClientFactory().createFromUrl(`${base}/a2a/${ns}/`);
});

after(async () => {
  await agent?.close();
  await hook?.close();
});

/** A SendMessageRequest, written in v1.0's wire JSON. */
const send = (skill, input, configuration, messageId = `m-${unique()}`) =>
  SendMessageRequest.fromJSON({ message: { messageId, role: 'ROLE_USER', parts: [part(input)] }, metadata: { skill }, configuration });

const wire = (task) => Task.toJSON(task);

test('the card names v1.0 JSON-RPC and the namespace\'s skills', async () => {
  assert.equal(client.protocolVersion, '1.0');
  const res = await fetch(`${base}/a2a/${ns}/.well-known/agent-card.json`);
  const card = await res.json();
  assert.deepEqual(card.supportedInterfaces[0], { protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: ns, url: `${base}/a2a/${ns}` });
  await waitFor('the skills on the card', async () => {
    const c = await (await fetch(`${base}/a2a/${ns}/.well-known/agent-card.json`)).json();
    return c.skills.map((s) => s.id).join() === 'v1.add,v1.fail,v1.hold';
  });
  const extended = await client.getAgentCard();
  assert.equal(extended.name, `Agent-Reach (${ns})`);
});

test('SendMessage, blocking: the task ends COMPLETED with the agent\'s result', async () => {
  const t = wire(await client.sendMessage(send('v1.add', { a: 2, b: 3 })));
  assert.equal(t.status.state, 'TASK_STATE_COMPLETED');
  assert.deepEqual(t.artifacts[0].parts[0].data, { sum: 5 });
  assert.equal((await job(t.id)).status, 'SUCCESS', 'the task id is the job id');
});

test('SendMessage, returnImmediately, then GetTask until it ends; the messageId is the idempotency key', async () => {
  const name = `g-${unique()}`;
  const g = hold(name);
  const messageId = `m-${unique()}`;
  const first = wire(await client.sendMessage(send('v1.hold', { gate: name, a: 1, b: 1 }, { returnImmediately: true }, messageId)));
  assert.ok(['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING'].includes(first.status.state), first.status.state);
  const again = wire(await client.sendMessage(send('v1.hold', { gate: name, a: 1, b: 1 }, { returnImmediately: true }, messageId)));
  assert.equal(again.id, first.id);
  g.open();
  const done = await waitFor('GetTask to read it completed', async () => {
    const t = wire(await client.getTask({ id: first.id }));
    return t.status.state === 'TASK_STATE_COMPLETED' && t;
  });
  assert.deepEqual(done.artifacts[0].parts[0].data, { sum: 2 });
  await assert.rejects(client.getTask({ id: '0190f1c2-0000-7000-8000-000000000000' }), (err) => err.name === 'TaskNotFoundError');
});

test('a skill no agent offers is refused at once, naming what is offered', async () => {
  const started = Date.now();
  await assert.rejects(client.sendMessage(send('v1.nobody', { a: 1 })), (err) => {
    assert.equal(err.envelopeCode, -32602);
    assert.match(err.message, /no agent in namespace .* offers the skill "v1.nobody" \(it offers: v1.add, v1.fail, v1.hold\)/);
    return true;
  });
  assert.ok(Date.now() - started < 5000, 'not after a wait for an agent');
});

test('a FAILED task carries the agent\'s words in its status; the job has them as its error', async () => {
  const t = wire(await client.sendMessage(send('v1.fail', { a: 1 })));
  assert.equal(t.status.state, 'TASK_STATE_FAILED');
  assert.equal(t.status.message.parts[0].text, 'out of paper');
  const j = await job(t.id);
  assert.equal(j.status, 'FAILED');
  assert.equal(j.error, 'out of paper');
  assert.equal(j.result, undefined, 'the text is the error, not the result');
});

test('SendStreamingMessage: StreamResponses, the task first, its artifact, then its status, until it ends', async () => {
  const name = `g-${unique()}`;
  const g = hold(name);
  const events = [];
  for await (const ev of client.sendMessageStream(send('v1.hold', { gate: name, a: 4, b: 5 }))) {
    assert.ok(ev.payload, `every event is a StreamResponse: ${JSON.stringify(StreamResponse.toJSON(ev))}`);
    events.push(StreamResponse.toJSON(ev));
    g.open();
  }
  assert.ok(events[0].task, 'the task first');
  const last = events.at(-1);
  assert.equal(last.statusUpdate?.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(events));
  assert.equal(last.statusUpdate.taskId, events[0].task.id);
  const art = events.findIndex((e) => e.artifactUpdate);
  assert.ok(art > 0 && art < events.length - 1, 'the artifact before the final status');
  assert.deepEqual(events[art].artifactUpdate.artifact.parts[0].data, { sum: 9 });
  assert.equal(events.filter((e) => e.task).length, 1, 'one task, then updates');
});

test('SubscribeToTask: the running task, then its updates; a task that ended is refused', async () => {
  const name = `g-${unique()}`;
  const g = hold(name);
  const sent = wire(await client.sendMessage(send('v1.hold', { gate: name, a: 10, b: 1 }, { returnImmediately: true })));
  const events = [];
  for await (const ev of client.resubscribeTask({ id: sent.id })) {
    assert.ok(ev.payload);
    events.push(StreamResponse.toJSON(ev));
    g.open();
  }
  assert.equal(events[0].task?.id, sent.id);
  assert.equal(events.at(-1).statusUpdate?.status.state, 'TASK_STATE_COMPLETED');
  assert.ok(events.some((e) => e.artifactUpdate?.artifact.parts[0].data?.sum === 11));
  await assert.rejects(async () => {
    for await (const _ of client.resubscribeTask({ id: sent.id })) {
      // a task that ended streams nothing
    }
  }, (err) => err.name === 'UnsupportedOperationError' || /-32004/.test(err.message));
});

test('CancelTask cancels the job and the agent\'s task; a task that ended cannot be cancelled', async () => {
  const name = `g-${unique()}`;
  hold(name);
  const sent = wire(await client.sendMessage(send('v1.hold', { gate: name }, { returnImmediately: true })));
  await waitFor('the agent to hold the job', async () => (await job(sent.id)).status === 'DELIVERED');
  const cancelled = wire(await client.cancelTask({ id: sent.id }));
  assert.equal(cancelled.status.state, 'TASK_STATE_CANCELED');
  assert.equal((await job(sent.id)).status, 'CANCELLED');
  await waitFor('the agent to be asked to cancel its task', () => agent.cancels.length > 0);
  await assert.rejects(client.cancelTask({ id: sent.id }), (err) => err.name === 'TaskNotCancelableError');
});

test('push configs: one with the message, more created while the task runs; get, list, delete; each is pushed the task in v1.0\'s shape', async () => {
  const name = `g-${unique()}`;
  const g = hold(name);
  const sent = wire(await client.sendMessage(send('v1.hold', { gate: name, a: 20, b: 2 }, {
    returnImmediately: true,
    taskPushNotificationConfig: { url: hook.url('/with-message'), token: 'tok-1', authentication: { scheme: 'Bearer', credentials: 'cred-1' } },
  })));
  await waitFor('the agent to hold the job', async () => (await job(sent.id)).status === 'DELIVERED');

  const created = await client.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({
    taskId: sent.id, id: 'created', url: hook.url('/created'), token: 'tok-2',
  }));
  assert.deepEqual(TaskPushNotificationConfig.toJSON(created), { taskId: sent.id, id: 'created', url: hook.url('/created'), token: 'tok-2' });
  await client.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: sent.id, id: 'doomed', url: hook.url('/doomed') }));
  await assert.rejects(client.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: sent.id, id: 'empty', url: '' })),
    (err) => err.envelopeCode === -32602, 'a config without a url is refused');

  const got = TaskPushNotificationConfig.toJSON(await client.getTaskPushNotificationConfig(
    GetTaskPushNotificationConfigRequest.fromJSON({ taskId: sent.id, id: 'created' })));
  assert.equal(got.url, hook.url('/created'));
  const listed = await client.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: sent.id }));
  assert.deepEqual(listed.configs.map((c) => c.id), ['default', 'created', 'doomed']);
  assert.equal(listed.configs[0].url, hook.url('/with-message'));
  assert.equal(listed.configs[0].authentication.credentials, '', 'credentials are not read back');
  await client.deleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: sent.id, id: 'doomed' }));
  await client.deleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: sent.id, id: 'doomed' }));
  const after = await client.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: sent.id }));
  assert.deepEqual(after.configs.map((c) => c.id), ['default', 'created']);
  await assert.rejects(client.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId: sent.id, id: 'doomed' })),
    (err) => err.name === 'TaskNotFoundError');

  g.open();
  await waitFor('the callback acknowledged', async () => (await job(sent.id)).callback?.acknowledged);
  const pushes = (path) => hook.got.filter((r) => r.path === path);
  for (const [path, auth, token] of [['/with-message', 'Bearer cred-1', 'tok-1'], ['/created', undefined, 'tok-2']]) {
    const [p, ...more] = pushes(path);
    assert.equal(more.length, 0, `${path} is pushed once`);
    assert.equal(p.headers['content-type'], 'application/a2a+json');
    assert.equal(p.headers.authorization, auth);
    assert.equal(p.headers['x-a2a-notification-token'], token);
    const sr = StreamResponse.fromJSON(p.body);
    assert.equal(sr.payload?.$case, 'task', `a StreamResponse: ${JSON.stringify(p.body)}`);
    const t = Task.toJSON(sr.payload.value);
    assert.equal(t.id, sent.id);
    assert.equal(t.status.state, 'TASK_STATE_COMPLETED');
    assert.deepEqual(t.artifacts[0].parts[0].data, { sum: 22 });
  }
  assert.equal(pushes('/doomed').length, 0, 'a deleted config is sent nothing');
  const types = (await jobEvents(sent.id)).map((e) => e.type);
  assert.deepEqual(types.slice(-2), ['SUCCESS', 'CALLBACK_DELIVERED']);
  assert.equal((await ended(sent.id)).status, 'SUCCESS');
});
