package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

const jobsHelp = `agentreach jobs: submit and follow jobs (--key or AGENTREACH_KEY, --server or AGENTREACH_URL)

  agentreach jobs submit --capability C --payload JSON [--hint H] [--priority high|normal|low]
                         [--callback-url URL] [--timeout 30s] [--max-attempts N] [--idempotency-key K] [--wait]
  agentreach jobs get JOB_ID
  agentreach jobs list [--status S] [--capability C] [--agent A] [--limit N]
  agentreach jobs events JOB_ID
  agentreach jobs cancel JOB_ID [--reason R]
  agentreach jobs replay JOB_ID

Every command takes --json for scripts.
`

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
	SubmittedAt time.Time       `json:"submitted_at"`
	FinishedAt  *time.Time      `json:"finished_at"`
}

func (m *Main) runJobs(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, jobsHelp)
		return fmt.Errorf("%w: agentreach jobs submit|get|list|events|cancel|replay", errUsage)
	}
	fs, c := m.apiFlags("jobs " + args[0])
	fs.Usage = func() { fmt.Fprint(fs.Output(), jobsHelp); fs.PrintDefaults() }
	// jobID parses the flags of a command that takes one JOB_ID.
	jobID := func() (string, error) {
		pos, err := fs.parse(args[1:])
		if err != nil {
			return "", err
		}
		if len(pos) != 1 {
			return "", fmt.Errorf("%w: agentreach jobs %s JOB_ID", errUsage, args[0])
		}
		return url.PathEscape(pos[0]), nil
	}
	switch args[0] {
	case "submit":
		capability := fs.String("capability", "", "the capability (required)")
		payload := fs.String("payload", "{}", "the payload, JSON")
		hint := fs.String("hint", "", "free text for routing")
		priority := fs.String("priority", "", "high, normal or low")
		callback := fs.String("callback-url", "", "where to POST the outcome")
		timeout := fs.Duration("timeout", 0, "per-attempt deadline")
		maxAttempts := fs.Int("max-attempts", 0, "attempts before the dead letter")
		key := fs.String("idempotency-key", "", "makes a retried submit return the same job")
		wait := fs.Bool("wait", false, "wait until the job is terminal and print it")
		if _, err := fs.parse(args[1:]); err != nil {
			return err
		}
		if *capability == "" {
			return fmt.Errorf("%w: --capability is required", errUsage)
		}
		if !json.Valid([]byte(*payload)) {
			return fmt.Errorf("%w: --payload must be JSON", errUsage)
		}
		body := map[string]any{"capability": *capability, "payload": json.RawMessage(*payload), "hint": *hint,
			"priority": *priority, "callback_url": *callback, "max_attempts": *maxAttempts, "timeout_ms": timeout.Milliseconds()}
		var out struct {
			JobID   string `json:"job_id"`
			Status  string `json:"status"`
			TraceID string `json:"trace_id"`
		}
		c.headers = map[string]string{"Idempotency-Key": *key}
		if err := c.do(ctx, http.MethodPost, "/v1/jobs", body, &out); err != nil {
			return err
		}
		if !*wait {
			if fs.json {
				return m.printJSON(out)
			}
			fmt.Fprintf(m.Stdout, "%s %s (trace %s)\n", out.JobID, out.Status, out.TraceID)
			return nil
		}
		for {
			var j jobView
			if err := c.get(ctx, "/v1/jobs/"+out.JobID, nil, &j); err != nil {
				return err
			}
			if j.FinishedAt != nil {
				return m.showJob(fs.json, j)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	case "get":
		id, err := jobID()
		if err != nil {
			return err
		}
		var j jobView
		if err := c.get(ctx, "/v1/jobs/"+id, nil, &j); err != nil {
			return err
		}
		return m.showJob(fs.json, j)
	case "list":
		status := fs.String("status", "", "only this status")
		capability := fs.String("capability", "", "only this capability")
		agent := fs.String("agent", "", "only jobs of this agent")
		limit := fs.Int("limit", 50, "how many")
		if _, err := fs.parse(args[1:]); err != nil {
			return err
		}
		q := url.Values{"limit": {fmt.Sprint(*limit)}}
		for k, v := range map[string]string{"status": *status, "capability": *capability, "agent_id": *agent} {
			if v != "" {
				q.Set(k, v)
			}
		}
		var out struct {
			Jobs []jobView `json:"jobs"`
		}
		if err := c.get(ctx, "/v1/jobs", q, &out); err != nil {
			return err
		}
		if fs.json {
			return m.printJSON(out)
		}
		tw := tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "JOB\tSTATUS\tCAPABILITY\tAGENT\tATTEMPTS\tSUBMITTED")
		for _, j := range out.Jobs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\n", j.JobID, j.Status, j.Capability, j.AgentID, j.Attempts, j.MaxAttempts, ago(j.SubmittedAt))
		}
		return tw.Flush()
	case "events":
		id, err := jobID()
		if err != nil {
			return err
		}
		var out struct {
			Events []struct {
				Version    int             `json:"version"`
				Type       string          `json:"type"`
				Data       json.RawMessage `json:"data"`
				RecordedAt time.Time       `json:"recorded_at"`
			} `json:"events"`
		}
		if err := c.get(ctx, "/v1/jobs/"+id+"/events", nil, &out); err != nil {
			return err
		}
		if fs.json {
			return m.printJSON(out)
		}
		tw := tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#\tAT\tEVENT\tDATA")
		for _, e := range out.Events {
			data := string(e.Data)
			if len(data) > 100 {
				data = data[:100] + "…"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", e.Version, e.RecordedAt.Format("15:04:05.000"), e.Type, data)
		}
		return tw.Flush()
	case "cancel", "replay":
		reason := ""
		if args[0] == "cancel" {
			fs.StringVar(&reason, "reason", "", "why")
		}
		id, err := jobID()
		if err != nil {
			return err
		}
		var out json.RawMessage
		var body any
		if reason != "" {
			body = map[string]string{"reason": reason}
		}
		if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+id+"/"+args[0], body, &out); err != nil {
			return err
		}
		if fs.json {
			_, err := m.Stdout.Write(append(out, '\n'))
			return err
		}
		var j jobView
		_ = json.Unmarshal(out, &j)
		fmt.Fprintf(m.Stdout, "%s %s\n", j.JobID, j.Status)
		return nil
	}
	fmt.Fprint(m.Stderr, jobsHelp)
	return fmt.Errorf("%w: unknown jobs command %q", errUsage, args[0])
}

func (m *Main) showJob(asJSON bool, j jobView) error {
	if asJSON {
		return m.printJSON(j)
	}
	tw := tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "job\t%s\nstatus\t%s\ncapability\t%s\nagent\t%s\nattempts\t%d of %d\ntrace\t%s\n", j.JobID, j.Status,
		j.Capability, j.AgentID, j.Attempts, j.MaxAttempts, j.TraceID)
	if len(j.Result) > 0 {
		fmt.Fprintf(tw, "result\t%s\n", strings.TrimSpace(string(j.Result)))
	}
	if j.BizCode != "" {
		fmt.Fprintf(tw, "biz_code\t%s\n", j.BizCode)
	}
	if j.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", j.Error)
	}
	return tw.Flush()
}
