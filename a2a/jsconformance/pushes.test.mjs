// Push configs of one task, of both protocol versions, each delivered and
// retried on its own: a config that fails is tried again, one that
// acknowledged is never sent to again, and each gets its own version's
// shape. Clients: @a2a-js/sdk 1.x (v1.0) and its 0.3 line (v0.3).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { SendMessageRequest, StreamResponse, TaskPushNotificationConfig } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { A2AClient } from 'a2a-sdk-v03/client';

import { base, gate, job, jobEvents, receiver, register, startAgent, unique, waitFor } from './harness.mjs';

console.info = () => {};

const ns = `jspush-${unique()}`;
const release = gate();
let agent, v1, v03, hook;

before(async () => {
  agent = await startAgent({
    name: 'JS Pushes',
    skills: ['push.hold'],
    work: async (input) => {
      await release.opened;
      return { data: { done: input.n } };
    },
  });
  await register(agent, ns, 'js-pushes', 'push.hold');
  // /flaky fails its first push; the others take theirs.
  hook = await receiver((r, nth) => (r.path === '/flaky' && nth === 1 ? 500 : 200));
  v1 = await new ClientFactory().createFromUrl(`${base}/a2a/${ns}/`);
  v03 = await A2AClient.fromCardUrl(`${base}/a2a/${ns}/.well-known/agent-card.json`);
});

after(async () => {
  await agent?.close();
  await hook?.close();
});

test('a failing config is retried alone; the others get the task once, each in its own version\'s shape', async () => {
  const sent = await v1.sendMessage(SendMessageRequest.fromJSON({
    message: { messageId: `m-${unique()}`, role: 'ROLE_USER', parts: [{ data: { n: 1 } }] },
    metadata: { skill: 'push.hold' },
    configuration: { returnImmediately: true, taskPushNotificationConfig: { id: 'flaky', url: hook.url('/flaky'), token: 't-flaky' } },
  }));
  await waitFor('the agent to hold the job', async () => (await job(sent.id)).status === 'DELIVERED');
  await v1.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: sent.id, id: 'steady-v1', url: hook.url('/steady-v1') }));
  const set = await v03.setTaskPushNotificationConfig({ taskId: sent.id, pushNotificationConfig: { id: 'steady-v03', url: hook.url('/steady-v03') } });
  assert.equal(set.error, undefined, JSON.stringify(set.error));

  release.open();
  const j = await waitFor('every config to acknowledge', async () => {
    const j = await job(sent.id);
    return j.callback?.acknowledged && j;
  }, 30000);
  assert.equal(j.status, 'SUCCESS');
  const count = (path) => hook.got.filter((r) => r.path === path).length;
  assert.equal(count('/flaky'), 2, 'the failing config is tried again');
  assert.equal(count('/steady-v1'), 1, 'a config that acknowledged is never sent to again');
  assert.equal(count('/steady-v03'), 1, 'a config that acknowledged is never sent to again');

  const v1Push = hook.got.find((r) => r.path === '/steady-v1');
  assert.equal(v1Push.headers['content-type'], 'application/a2a+json');
  assert.equal(StreamResponse.fromJSON(v1Push.body).payload?.$case, 'task');
  assert.equal(v1Push.body.task.status.state, 'TASK_STATE_COMPLETED');
  const flaky = hook.got.filter((r) => r.path === '/flaky').at(-1);
  assert.equal(flaky.body.task.status.state, 'TASK_STATE_COMPLETED', 'a config given with a v1.0 message is a v1.0 config');
  const v03Push = hook.got.find((r) => r.path === '/steady-v03');
  assert.equal(v03Push.headers['content-type'], 'application/json');
  assert.equal(v03Push.body.kind, 'task');
  assert.equal(v03Push.body.status.state, 'completed');
  assert.deepEqual(v03Push.body.artifacts[0].parts[0].data, { done: 1 });

  const callbacks = (await jobEvents(sent.id)).filter((e) => e.type.startsWith('CALLBACK_'));
  assert.deepEqual(callbacks.map((e) => e.type), ['CALLBACK_FAILED', 'CALLBACK_DELIVERED']);
  const tried = (e) => Object.fromEntries(e.data.pushes.map((p) => [p.config_id, p.delivered]));
  assert.deepEqual(tried(callbacks[0]), { flaky: false, 'steady-v1': true, 'steady-v03': true });
  assert.equal(callbacks[0].data.pending, 1);
  assert.deepEqual(tried(callbacks[1]), { flaky: true }, 'the retry posts to the failing config alone');
});
