package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentreach/agentreach/sdk/client"
)

const jobsHelp = `agentreach jobs: submit and follow jobs (--key or AGENTREACH_KEY, --server or AGENTREACH_URL)

  agentreach jobs submit --capability C [--payload JSON|@FILE|@-] [--namespace NS] [--hint H] [--priority high|normal|low]
                         [--callback-url URL] [--timeout 30s] [--max-attempts N] [--idempotency-key K] [--wait]
  agentreach jobs submit --intent "words" [the same flags]
  agentreach jobs get JOB_ID
  agentreach jobs list [--namespace NS] [--status S] [--capability C] [--agent A] [--via rest|a2a|mcp] [--q TEXT] [--trace-id T]
                       [--since 24h|TIME] [--until 24h|TIME] [--limit N (any)] [--cursor JOB_ID]
  agentreach jobs events JOB_ID [--follow]
  agentreach jobs cancel JOB_ID [--reason R]
  agentreach jobs replay JOB_ID

submit names what the job needs by --capability, or by --intent, the
caller's words the service resolves to a capability. --payload @FILE
reads the payload from FILE, @- from standard input. events --follow
prints each event as it comes until the job ends (--json: one event a
line).

Every command takes --server, --key and --json (the service's answer, as
the API gives it). Exit status: 0 done, 1 an error, 2 a usage mistake;
submit --wait exits 3 when the job ends in another status than SUCCESS
(FAILED, DEAD_LETTER, CANCELLED, REJECTED). "agentreach jobs COMMAND -h"
lists a command's flags.

`

// jobView is the part of the API's job the commands show.
type jobView struct {
	JobID       string          `json:"job_id"`
	Status      string          `json:"status"`
	Capability  string          `json:"capability"`
	AgentID     string          `json:"agent_id"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	Result      json.RawMessage `json:"result"`
	BizCode     string          `json:"biz_code"`
	Error       string          `json:"error"`
	TraceID     string          `json:"trace_id"`
	Via         string          `json:"via"`
	SubmittedAt time.Time       `json:"submitted_at"`
	FinishedAt  *time.Time      `json:"finished_at"`
	// Waiting is why a job not under way cannot be routed now.
	Waiting *waitingView `json:"waiting"`
}

type waitingView struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// jobsCommand is one `agentreach jobs NAME ARGS...`, its flags not yet
// parsed.
type jobsCommand struct {
	env  Env
	fs   *Flags
	c    *Client
	name string
	args []string
}

// Jobs runs `agentreach jobs submit|get|list|events|cancel|replay`; a call
// without a known subcommand is an ErrUsage, and an error answer of the
// API an *APIError.
func Jobs(ctx context.Context, env Env, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, jobsHelp)
		return fmt.Errorf("%w: agentreach jobs submit|get|list|events|cancel|replay", ErrUsage)
	}
	if IsHelp(args[0]) {
		fmt.Fprint(env.Stdout, jobsHelp)
		return nil
	}
	fs, c := APIFlags(env, "jobs "+args[0])
	fs.Usage = func() { fmt.Fprint(fs.Output(), jobsHelp); fs.PrintDefaults() }
	j := &jobsCommand{env: env, fs: fs, c: c, name: args[0], args: args[1:]}
	switch args[0] {
	case "submit":
		return UsageMistake(fs.FlagSet, j.submit(ctx))
	case "get":
		return UsageMistake(fs.FlagSet, j.get(ctx))
	case "list":
		return UsageMistake(fs.FlagSet, j.list(ctx))
	case "events":
		return UsageMistake(fs.FlagSet, j.events(ctx))
	case "cancel", "replay":
		return UsageMistake(fs.FlagSet, j.act(ctx))
	}
	fmt.Fprint(env.Stderr, jobsHelp)
	return fmt.Errorf("%w: unknown jobs command %q", ErrUsage, args[0])
}

// jobID parses the flags of a command that takes one JOB_ID.
func (j *jobsCommand) jobID() (string, error) {
	pos, err := j.fs.ParsePositional(j.args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", fmt.Errorf("%w: agentreach jobs %s JOB_ID", ErrUsage, j.name)
	}
	return pos[0], nil
}

func (j *jobsCommand) submit(ctx context.Context) error {
	fs := j.fs
	capability := fs.String("capability", "", "the capability (this or --intent)")
	intent := fs.String("intent", "", "the caller's words, resolved by the service to a capability (instead of --capability)")
	namespace := fs.String("namespace", "", "the job's namespace (default: the key's, or default for a key of every namespace)")
	payloadArg := fs.String("payload", "{}", "the payload: JSON, or @FILE to read it from FILE, @- from standard input")
	hint := fs.String("hint", "", "free text for routing")
	priority := fs.String("priority", "", "high, normal or low")
	callback := fs.String("callback-url", "", "where to POST the outcome")
	timeout := fs.Duration("timeout", 0, "per-attempt deadline")
	maxAttempts := fs.Int("max-attempts", 0, "attempts before the dead letter")
	key := fs.String("idempotency-key", "", "makes a retried submit return the same job")
	wait := fs.Bool("wait", false, "wait until the job is terminal and print it")
	if _, err := fs.ParsePositional(j.args); err != nil {
		return err
	}
	switch {
	case *capability == "" && *intent == "":
		return fmt.Errorf("%w: --capability or --intent is required", ErrUsage)
	case *capability != "" && *intent != "":
		return fmt.Errorf("%w: --capability or --intent, not both", ErrUsage)
	}
	payload, err := j.payload(*payloadArg)
	if err != nil {
		return err
	}
	var sub client.Submitted
	err = j.c.call(func(sc *client.Client) (err error) {
		sub, err = sc.Submit(ctx, client.SubmitRequest{Namespace: *namespace, Capability: *capability, Intent: *intent, Payload: payload, Hint: *hint,
			Priority: client.Priority(*priority), CallbackURL: *callback, MaxAttempts: *maxAttempts, TimeoutMS: timeout.Milliseconds(),
			IdempotencyKey: *key})
		return err
	})
	if err != nil {
		return err
	}
	if *wait {
		return j.waitFinished(ctx, sub.JobID)
	}
	if fs.JSON {
		return PrintRaw(j.env.Stdout, sub.Raw)
	}
	p := j.env.paletteFor(j.env.Stdout, false)
	fmt.Fprintf(j.env.Stdout, "%s %s (trace %s)\n", sub.JobID, p.word(string(sub.Status), string(sub.Status)), sub.TraceID)
	return nil
}

// payload reads --payload: JSON as it is, @FILE the JSON in FILE, @- the
// JSON on standard input. A file that cannot be read, or is not JSON, is a
// usage mistake.
func (j *jobsCommand) payload(arg string) (json.RawMessage, error) {
	b := []byte(arg)
	from := "--payload"
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		switch name {
		case "":
			return nil, fmt.Errorf("%w: --payload @FILE: name the file (@- reads standard input)", ErrUsage)
		case "-":
			from = "--payload @- (standard input)"
			b, err = io.ReadAll(j.env.stdin())
		default:
			from = "--payload @" + name
			b, err = os.ReadFile(name)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUsage, from, err)
		}
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || !json.Valid(b) {
		return nil, fmt.Errorf("%w: %s must be JSON", ErrUsage, from)
	}
	return json.RawMessage(b), nil
}

// waitFinished waits until the job is terminal, then shows it; a job that
// ended in another status than SUCCESS is an ErrNotSucceeded.
func (j *jobsCommand) waitFinished(ctx context.Context, id string) error {
	var job client.Job
	if err := j.c.call(func(sc *client.Client) (err error) { job, err = sc.Wait(ctx, id); return err }); err != nil {
		return err
	}
	if err := j.show(job.Raw, viewOf(job)); err != nil {
		return err
	}
	if job.Status != client.StatusSuccess {
		return fmt.Errorf("%w: job %s ended %s", ErrNotSucceeded, job.JobID, job.Status)
	}
	return nil
}

// viewOf is the part of job the commands show.
func viewOf(job client.Job) jobView {
	return jobView{JobID: job.JobID, Status: string(job.Status), Capability: job.Capability, AgentID: job.AgentID, Attempts: job.Attempts,
		MaxAttempts: job.MaxAttempts, Result: job.Result, BizCode: job.BizCode, Error: job.Error, TraceID: job.TraceID,
		SubmittedAt: job.SubmittedAt, FinishedAt: job.FinishedAt}
}

func (j *jobsCommand) get(ctx context.Context) error {
	id, err := j.jobID()
	if err != nil {
		return err
	}
	var job client.Job
	if err := j.c.call(func(sc *client.Client) (err error) { job, err = sc.Get(ctx, id); return err }); err != nil {
		return err
	}
	v := viewOf(job)
	var extra struct {
		Waiting *waitingView `json:"waiting"`
	}
	var via struct {
		Via string `json:"via"`
	}
	if json.Unmarshal(job.Raw, &extra) == nil {
		v.Waiting = extra.Waiting
	}
	if json.Unmarshal(job.Raw, &via) == nil {
		v.Via = via.Via
	}
	return j.show(job.Raw, v)
}

func (j *jobsCommand) list(ctx context.Context) error {
	fs := j.fs
	namespace := fs.String("namespace", "", "only this namespace")
	status := fs.String("status", "", "only this status")
	capability := fs.String("capability", "", "only this capability")
	agent := fs.String("agent", "", "only jobs of this agent")
	via := fs.String("via", "", "only jobs submitted through this face: rest, a2a or mcp")
	search := fs.String("q", "", "a job id or trace id prefix, or text of the error (with --since)")
	trace := fs.String("trace-id", "", "only this trace id (or its prefix)")
	since := fs.String("since", "", "submitted since: a duration back from now (24h) or an RFC 3339 time")
	until := fs.String("until", "", "submitted before: a duration back from now or an RFC 3339 time")
	cursor := fs.String("cursor", "", "start after this job (the next_cursor a list printed)")
	limit := fs.Int("limit", 50, "how many (any number: pages of 500 are followed)")
	if _, err := fs.ParsePositional(j.args); err != nil {
		return err
	}
	if *limit < 1 {
		return fmt.Errorf("%w: --limit must be at least 1", ErrUsage)
	}
	q := url.Values{}
	for k, v := range map[string]string{"namespace": *namespace, "status": *status, "capability": *capability, "agent_id": *agent,
		"via": *via, "q": *search, "trace_id": *trace} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for k, v := range map[string]string{"since": *since, "until": *until} {
		if v == "" {
			continue
		}
		t, err := timeArg(v, time.Now())
		if err != nil {
			return fmt.Errorf("%w: --%s: %w", ErrUsage, k, err)
		}
		q.Set(k, t.UTC().Format(time.RFC3339Nano))
	}
	type page struct {
		Jobs       []json.RawMessage `json:"jobs"`
		NextCursor string            `json:"next_cursor"`
	}
	var all page
	all.NextCursor = *cursor
	for first := true; first || (all.NextCursor != "" && len(all.Jobs) < *limit); first = false {
		q.Set("limit", fmt.Sprint(min(*limit-len(all.Jobs), 500)))
		if all.NextCursor != "" {
			q.Set("cursor", all.NextCursor)
		}
		var p page
		if err := j.c.Get(ctx, "/v1/jobs", q, &p); err != nil {
			return err
		}
		all.Jobs, all.NextCursor = append(all.Jobs, p.Jobs...), p.NextCursor
	}
	if all.Jobs == nil {
		all.Jobs = []json.RawMessage{}
	}
	if fs.JSON {
		return PrintJSON(j.env.Stdout, all)
	}
	p := j.env.paletteFor(j.env.Stdout, false)
	tw := tabwriter.NewWriter(j.env.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "JOB\t%s\tCAPABILITY\tAGENT\tATTEMPTS\tVIA\tSUBMITTED\n", p.cell("STATUS"))
	for _, raw := range all.Jobs {
		var v client.Job
		var face struct {
			Via string `json:"via"`
		}
		if err := errors.Join(json.Unmarshal(raw, &v), json.Unmarshal(raw, &face)); err != nil {
			return fmt.Errorf("the service's list of jobs: %w", err)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", v.JobID, p.cell(string(v.Status)), v.Capability, v.AgentID, v.Attempts, v.MaxAttempts,
			cmp.Or(face.Via, "rest"), Ago(v.SubmittedAt))
	}
	if len(all.Jobs) == 0 {
		fmt.Fprintln(tw, "(no jobs)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if all.NextCursor != "" {
		fmt.Fprintf(j.env.Stderr, "more: --cursor %s\n", all.NextCursor)
	}
	return nil
}

// timeArg is a time given as a duration back from now (24h) or as RFC 3339.
func timeArg(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration (24h) nor an RFC 3339 time", v)
	}
	return t, nil
}

func (j *jobsCommand) events(ctx context.Context) error {
	follow := j.fs.Bool("follow", false, "print each event as it comes, until the job ends (--json: one event a line)")
	id, err := j.jobID()
	if err != nil {
		return err
	}
	if *follow {
		return j.follow(ctx, id)
	}
	var raw json.RawMessage
	if err := j.c.Get(ctx, "/v1/jobs/"+url.PathEscape(id)+"/events", nil, &raw); err != nil {
		return err
	}
	if j.fs.JSON {
		return PrintRaw(j.env.Stdout, raw)
	}
	var out struct {
		Events []client.Event `json:"events"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("the service's events of job %s: %w", id, err)
	}
	ep := &eventPrinter{w: j.env.Stdout, p: j.env.paletteFor(j.env.Stdout, false)}
	return ep.print(out.Events)
}

// followWait is how long each long-poll of a followed job waits for its
// end: the longest an event waits to be printed.
const followWait = time.Second

// follow prints the job's events as they come, in the format of jobs
// events (with --json, each event's JSON on a line of its own), until the
// job is terminal. The API has no stream of one job's events: it reads
// the events after the last it printed each time a long-poll of the job
// (GET /v1/jobs/{id}?wait_ms=) answers, which is at once when the job
// ends, else after followWait. Interrupted (Ctrl-C), it stops quietly.
func (j *jobsCommand) follow(ctx context.Context, id string) error {
	ep := &eventPrinter{w: j.env.Stdout, p: j.env.paletteFor(j.env.Stdout, false)}
	path := "/v1/jobs/" + url.PathEscape(id)
	last, ended := 0, false
	for {
		var page struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := j.c.Get(ctx, path+"/events", nil, &page); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		fresh, err := j.freshEvents(page.Events, &last)
		if err != nil {
			return err
		}
		if !j.fs.JSON {
			if err := ep.print(fresh); err != nil {
				return err
			}
		}
		if ended {
			return nil
		}
		var job client.Job
		err = j.c.Get(ctx, path, url.Values{"wait_ms": {fmt.Sprint(followWait.Milliseconds())}}, &job)
		var apiErr *APIError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests:
			// The key holds as many waits as the service allows: poll.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(followWait):
			}
		case err != nil:
			return err
		}
		ended = job.Status.Terminal()
	}
}

// freshEvents decodes the events after version *last and moves *last to
// the latest; with --json it prints each one's JSON on a line and answers
// none, else it answers them to print.
func (j *jobsCommand) freshEvents(page []json.RawMessage, last *int) ([]client.Event, error) {
	var fresh []client.Event
	for _, raw := range page {
		var e client.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("the service's events of a job: %w", err)
		}
		if e.Version <= *last {
			continue
		}
		*last = e.Version
		if !j.fs.JSON {
			fresh = append(fresh, e)
			continue
		}
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return nil, err
		}
		b.WriteByte('\n')
		if _, err := j.env.Stdout.Write(b.Bytes()); err != nil {
			return nil, err
		}
	}
	return fresh, nil
}

// shorten cuts s to n bytes and marks the cut.
func shorten(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// act is cancel or replay: a POST to the job's action, with cancel's reason.
func (j *jobsCommand) act(ctx context.Context) error {
	reason := ""
	if j.name == "cancel" {
		j.fs.StringVar(&reason, "reason", "", "why")
	}
	id, err := j.jobID()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	var jobID, status string
	err = j.c.call(func(sc *client.Client) error {
		if j.name == "cancel" {
			job, err := sc.Cancel(ctx, id, reason)
			raw, jobID, status = job.Raw, job.JobID, string(job.Status)
			return err
		}
		sub, err := sc.Replay(ctx, id)
		raw, jobID, status = sub.Raw, sub.JobID, string(sub.Status)
		return err
	})
	if err != nil {
		return err
	}
	if j.fs.JSON {
		return PrintRaw(j.env.Stdout, raw)
	}
	fmt.Fprintf(j.env.Stdout, "%s %s\n", jobID, j.env.paletteFor(j.env.Stdout, false).word(status, status))
	return nil
}

// show prints a job: the service's answer raw with --json, else v.
func (j *jobsCommand) show(raw json.RawMessage, v jobView) error {
	if j.fs.JSON {
		return PrintRaw(j.env.Stdout, raw)
	}
	p := j.env.paletteFor(j.env.Stdout, false)
	tw := tabwriter.NewWriter(j.env.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "job\t%s\nstatus\t%s\ncapability\t%s\nagent\t%s\nattempts\t%d of %d\ntrace\t%s\n", v.JobID, p.word(v.Status, v.Status),
		v.Capability, v.AgentID, v.Attempts, v.MaxAttempts, v.TraceID)
	if len(v.Result) > 0 {
		fmt.Fprintf(tw, "result\t%s\n", strings.TrimSpace(string(v.Result)))
	}
	if v.BizCode != "" {
		fmt.Fprintf(tw, "biz_code\t%s\n", v.BizCode)
	}
	if v.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", v.Error)
	}
	if v.Waiting != nil {
		fmt.Fprintf(tw, "waiting\t%s: %s\n", v.Waiting.Code, v.Waiting.Message)
	}
	if v.Via != "" {
		fmt.Fprintf(tw, "via\t%s\n", v.Via)
	}
	return tw.Flush()
}
