// What the suite's tests share: the service under test (AGENTREACH_URL),
// its REST API, and waiting on a condition with a deadline.
export const base = process.env.AGENTREACH_URL;
if (!base) {
  throw new Error('AGENTREACH_URL must name the Agent-Reach under test (cmd/agentreach TestMCPJavaScriptSDK sets it)');
}

/** Calls the REST API and answers {status, body} (body parsed). */
export async function rest(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** Waits until cond() answers something truthy, and answers it; fails after within ms. */
export async function waitFor(what, cond, within = 20000) {
  const deadline = Date.now() + within;
  for (;;) {
    const got = await cond();
    if (got) return got;
    if (Date.now() > deadline) throw new Error(`not within ${within} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50)); // the poll interval while waiting on the condition
  }
}
