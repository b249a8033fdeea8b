// Agents built with @a2a-js/sdk 1.x (A2A v1.0), registered by their cards,
// running jobs submitted over Agent-Reach's REST API: success and failure
// come back by the SDK's own push notifications (or by polling, for an
// agent whose card offers none), and an agent killed and restarted
// mid-task, which has lost the task, gets the job again at once rather
// than at its deadline.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { ended, eventTypes, gate, job, jobEvents, register, rest, startAgent, unique, waitFor } from './harness.mjs';

console.info = () => {};

const ns = `jsagent-${unique()}`;
const agents = [];

after(async () => {
  await Promise.all(agents.map((a) => a.close()));
});

const submit = async (capability, payload, extra = {}) => {
  const { status, body } = await rest('POST', '/v1/jobs', { namespace: ns, capability, payload, ...extra });
  assert.equal(status, 202, JSON.stringify(body));
  return body.job_id;
};

test('a job for an SDK agent ends SUCCESS with its result, pushed by the agent', async () => {
  const a = await startAgent({ name: 'JS Adder', skills: ['agent.add'], work: async (x) => ({ data: { sum: x.a + x.b } }) });
  agents.push(a);
  await register(a, ns, 'js-adder', 'agent.add');
  const id = await submit('agent.add', { a: 40, b: 2 });
  const j = await ended(id);
  assert.equal(j.status, 'SUCCESS', j.error);
  assert.deepEqual(j.result, { sum: 42 });
  const evs = await jobEvents(id);
  assert.deepEqual(evs.map((e) => e.type), ['SUBMITTED', 'ROUTED', 'DELIVERED', 'SUCCESS']);
  assert.equal(evs[3].metadata.actor, 'a2a:push:js-adder', 'the result came by the SDK\'s push');
  assert.equal(a.messages[0].messageId, id, 'the message id is the job id');
  assert.equal(a.messages[0].metadata.skill, 'agent.add');
});

test('a task the agent fails is FAILED, with the agent\'s words as the error', async () => {
  const a = await startAgent({ name: 'JS Failer', skills: ['agent.fail'], work: async () => { throw new Error('the printer is on fire'); } });
  agents.push(a);
  await register(a, ns, 'js-failer', 'agent.fail');
  const j = await ended(await submit('agent.fail', {}));
  assert.equal(j.status, 'FAILED');
  assert.equal(j.error, 'the printer is on fire');
  assert.equal(j.biz_code, 'a2a_failed');
  assert.equal(j.result, undefined);
});

for (const push of [true, false]) {
  test(`an agent ${push ? 'that pushes' : 'without push (polled)'}, restarted mid-task, gets the job again at once`, async () => {
    const hold = gate(); // never opened: the first task is lost with the process
    let calls = 0;
    const skill = `agent.restart.${push ? 'push' : 'poll'}`;
    const a = await startAgent({
      name: `JS Restarter ${push ? 'push' : 'poll'}`,
      skills: [skill],
      push,
      work: async (x) => {
        calls++;
        if (calls === 1) {
          await hold.opened;
        }
        return { data: { twice: x.n * 2 } };
      },
    });
    agents.push(a);
    const agentID = `js-restarter-${push ? 'push' : 'poll'}`;
    await register(a, ns, agentID, skill);
    const id = await submit(skill, { n: 21 }, { timeout_ms: 120000 });
    await waitFor('the agent to hold the job', async () => (await job(id)).status === 'DELIVERED');
    await a.restart();
    const restarted = Date.now();
    const j = await ended(id, 30000);
    assert.ok(Date.now() - restarted < 30000, 'found out long before the 120 s deadline');
    assert.equal(j.status, 'SUCCESS', j.error);
    assert.deepEqual(j.result, { twice: 42 });
    assert.equal(j.attempts, 2);
    const evs = await jobEvents(id);
    const lost = evs.find((e) => e.type === 'ATTEMPT_FAILED');
    assert.equal(lost?.data.reason, 'a2a_task_lost', JSON.stringify(evs.map((e) => [e.type, e.data.reason])));
    assert.deepEqual(await eventTypes(id), ['SUBMITTED', 'ROUTED', 'DELIVERED', 'ATTEMPT_FAILED', 'ROUTED', 'DELIVERED', 'SUCCESS']);
    assert.equal(calls, 2);
  });
}
