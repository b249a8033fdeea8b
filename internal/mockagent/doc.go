// Package mockagent is `agentreach mock-agent`: a test agent, built on the
// Go agent SDK, that registers with Agent-Reach, heartbeats, and answers
// every delivery the way its --behaviour says (succeed, fail, refuse,
// hang, be flaky or answer asynchronously). With --pull it registers in
// pull mode and claims its deliveries instead of serving them.
package mockagent
