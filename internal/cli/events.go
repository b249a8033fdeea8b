package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentreach/agentreach/sdk/client"
)

// routedData is what the CLI reads of a ROUTED event: the attempt, its
// agent and the routing explanation.
type routedData struct {
	Attempt int    `json:"attempt"`
	AgentID string `json:"agent_id"`
	Route   *struct {
		Candidates []struct {
			AgentID string  `json:"agent_id"`
			Score   float64 `json:"score"`
			Terms   []struct {
				Name  string  `json:"name"`
				Value float64 `json:"value"`
			} `json:"terms"`
		} `json:"candidates"`
		Rejected []struct {
			AgentID string `json:"agent_id"`
			Reason  string `json:"reason"`
		} `json:"rejected"`
		Chosen        string `json:"chosen"`
		Canary        bool   `json:"canary"`
		PolicyVersion int    `json:"policy_version"`
	} `json:"route"`
}

// eventPrinter writes a job's events a line each, and under each ROUTED
// its routing explanation as a table: every candidate with its score and
// its terms, every agent ruled out with the reason, and why there was no
// candidate when there was none. It takes them in as many calls as they
// come in (jobs events --follow): the header once, and what the job's
// SUBMITTED said for the ROUTED after it.
type eventPrinter struct {
	w                     io.Writer
	p                     palette
	headed                bool
	namespace, capability string
}

func (ep *eventPrinter) print(evs []client.Event) error {
	w := ep.w
	if !ep.headed {
		fmt.Fprintf(w, "%3s  %-12s  %-18s  %s\n", "#", "AT", "EVENT", "DATA")
		ep.headed = true
	}
	for _, e := range evs {
		typ := ep.p.word(e.Type, fmt.Sprintf("%-18s", e.Type))
		if e.Type == "SUBMITTED" {
			var d struct {
				Namespace  string `json:"namespace"`
				Capability string `json:"capability"`
			}
			_ = json.Unmarshal(e.Data, &d)
			ep.namespace, ep.capability = d.Namespace, d.Capability
		}
		if e.Type == "DELIVERED" || e.Type == "ATTEMPT_FAILED" {
			fmt.Fprintf(w, "%3d  %-12s  %s  %s\n", e.Version, e.RecordedAt.Format("15:04:05.000"), typ, answerLine(e.Data))
			continue
		}
		if e.Type != "ROUTED" {
			fmt.Fprintf(w, "%3d  %-12s  %s  %s\n", e.Version, e.RecordedAt.Format("15:04:05.000"), typ, shorten(string(e.Data), 100))
			continue
		}
		var d routedData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return fmt.Errorf("ROUTED event %d: %w", e.Version, err)
		}
		to := d.AgentID
		if to == "" {
			to = "no agent"
		}
		fmt.Fprintf(w, "%3d  %-12s  %s  attempt %d to %s\n", e.Version, e.RecordedAt.Format("15:04:05.000"), typ, d.Attempt, to)
		if err := printRoute(w, d, ep.namespace, ep.capability); err != nil {
			return err
		}
	}
	return nil
}

// answerData is what the CLI reads of a DELIVERED or ATTEMPT_FAILED event:
// what the agent answered the attempt.
type answerData struct {
	Attempt    int        `json:"attempt"`
	AgentID    string     `json:"agent_id"`
	HTTPStatus int        `json:"http_status"`
	LatencyMS  *float64   `json:"latency_ms"`
	Async      bool       `json:"async"`
	Error      string     `json:"error"`
	Reason     string     `json:"reason"`
	RetryAt    *time.Time `json:"retry_at"`
}

// answerLine says what the agent answered an attempt: its HTTP status and
// latency, the first bytes of the error, the reason and when it is retried
// ("attempt 1 at a1: HTTP 503 in 2.06 ms: warming up [http_503], retry at
// 03:04:05.100"); an event it cannot read is shown raw.
func answerLine(data json.RawMessage) string {
	var d answerData
	if err := json.Unmarshal(data, &d); err != nil || d.Attempt == 0 {
		return shorten(string(data), 100)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "attempt %d at %s:", d.Attempt, d.AgentID)
	if d.HTTPStatus > 0 {
		fmt.Fprintf(&b, " HTTP %d", d.HTTPStatus)
	} else {
		b.WriteString(" no HTTP answer")
	}
	if d.LatencyMS != nil {
		fmt.Fprintf(&b, " in %.2f ms", *d.LatencyMS)
	}
	if d.Async {
		b.WriteString(", accepted: the result comes later")
	}
	if msg := strings.Join(strings.Fields(d.Error), " "); msg != "" {
		b.WriteString(": " + shorten(msg, 80))
	}
	if d.Reason != "" {
		b.WriteString(" [" + d.Reason + "]")
	}
	if d.RetryAt != nil {
		b.WriteString(", retry at " + d.RetryAt.Format("15:04:05.000"))
	}
	return b.String()
}

// printRoute writes one attempt's routing explanation, indented under its
// event.
func printRoute(w io.Writer, d routedData, namespace, capability string) error {
	const indent = "       "
	r := d.Route
	if r == nil {
		return nil
	}
	if len(r.Candidates) == 0 {
		if len(r.Rejected) == 0 {
			fmt.Fprintf(w, "%sno candidate: no agent of namespace %s offers %s\n", indent, namespace, capability)
			return nil
		}
		fmt.Fprintf(w, "%sno candidate: every agent offering %s was ruled out\n", indent, capability)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%sCANDIDATE\tSCORE\tTERMS\n", indent)
	for _, c := range r.Candidates {
		name := c.AgentID
		if c.AgentID == r.Chosen {
			name += " (chosen)"
			if r.Canary {
				name += " canary"
			}
		}
		var terms []string
		for _, t := range c.Terms {
			if t.Value != 0 {
				terms = append(terms, fmt.Sprintf("%s %+.1f", t.Name, t.Value))
			}
		}
		fmt.Fprintf(tw, "%s%s\t%.1f\t%s\n", indent, name, c.Score, strings.Join(terms, ", "))
	}
	for _, x := range r.Rejected {
		fmt.Fprintf(tw, "%s%s\t-\truled out: %s\n", indent, x.AgentID, x.Reason)
	}
	if r.PolicyVersion > 0 {
		fmt.Fprintf(tw, "%s(routing policy v%d)\t\t\n", indent, r.PolicyVersion)
	}
	return tw.Flush()
}
