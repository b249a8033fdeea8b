// Package sdk is the Go library an agent imports to take work from
// Agent-Reach: it serves deliveries over HTTP, registers (after a random
// start-up jitter, so a fleet restarting together does not stampede),
// heartbeats on a goroutine of its own that never waits on the agent's work,
// re-registers when the registry has forgotten it, reports results of
// asynchronous work, and goes offline gracefully when its context ends.
// Every call to Agent-Reach (register, heartbeat, claim, release, a
// result) is tried again, a few times within its context, when the service
// answers 429 or 503 (it wrote nothing; after its Retry-After) or the
// request never left; a result also after a broken connection, since a
// repeated result is recorded as a harmless duplicate. A push agent
// registered with a MaxConcurrent that already holds that many jobs
// answers another delivery 503 with Retry-After: 1, which pauses it a
// second without counting against it.
//
// Config's ServerURL and APIKey default to the environment's
// AGENTREACH_URL and AGENTREACH_KEY, and its Logger to standard error. A
// registration the service refuses for good (400, 401, 403) ends Run with
// that error rather than being retried.
//
//	agent := sdk.New(sdk.Config{ServerURL: "http://127.0.0.1:8080"},
//		sdk.Registration{AgentID: "ocr-1", Capabilities: []string{"document:parse:ocr"}},
//		func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
//			return sdk.Success(map[string]any{"text": "..."}), nil
//		})
//	err := agent.Run(ctx)
//
// # Pull mode
//
// An agent with no inbound endpoint registers with Mode ModePull and claims
// its work: Run then listens on nothing and registers no endpoint or
// health URL (it returns an error if the Registration has one). The same
// Handler serves the claimed deliveries on MaxConcurrent workers (1 when it
// is 0, and registered so). The claim loop asks for as many deliveries as
// there are free workers, long-polls up to Config.ClaimWait (default 20 s),
// never holds more than MaxConcurrent, backs off on errors and registers
// again when the registry has forgotten the agent (404 or 401).
//
//	agent := sdk.New(sdk.Config{ServerURL: "http://127.0.0.1:8080"},
//		sdk.Registration{AgentID: "ocr-1", Mode: sdk.ModePull, MaxConcurrent: 4,
//			Capabilities: []string{"document:parse:ocr"}}, handler)
//	err := agent.Run(ctx)
//
// A handler's outcome in pull mode: a Result is reported to the delivery's
// result URL; ErrAccepted keeps the delivery (and its worker) held until
// the handler's Agent.Report or the deadline; ErrRefused releases the
// attempt unstarted (routed again at once, no attempt spent); any other
// error or a panic releases it as a failed attempt, with the error's text.
// A job's context ends at the delivery's deadline or at its Report. A
// handler that runs long is kept by itself: at two thirds of its time the
// agent reports progress, extending the deadline by the attempt's whole
// time again (its context's Deadline moves with it), for a claimed job and
// a push job answered 202; Agent.Progress says more (the caller reads it
// as PROGRESS). An attempt that no longer runs ends the context with cause
// ErrJobCancelled. A handler answering a push inline keeps the deadline it
// came with. A pull
// agent learns of cancelled jobs from its heartbeats' answers (it has no
// endpoint for a cancel notice): the context of a cancelled attempt it
// holds ends with cause ErrJobCancelled, and nothing is sent back for it.
//
// When Run's context ends a pull agent stops claiming and gives back,
// unstarted, any delivery a claim brought as it stopped. It waits for the
// deliveries it holds, heartbeating meanwhile, up to Config.ShutdownGrace
// (default 30 s); then it cancels the jobs still running (cause
// ErrShutdown) and gives their workers up to 5 s to release them. Last it
// goes offline, which gives back whatever is still in its inbox. A delivery
// whose outcome could not be sent times out at its deadline on the server.
//
// # Direct calls
//
// A caller in lookup mode (POST /v1/lookup, then a call to the agent's
// endpoint itself; see the sdk/client package) sends the envelope with an
// invocation grant in the X-Reach-Grant header instead of a signature. A
// push agent checks it with VerifyGrant (signed for this agent's token,
// naming this agent and the capability called, not expired), marks the
// Delivery Direct and runs the same Handler; a direct call is answered
// inline (ErrAccepted answers 501: there is no result_url).
package sdk
