package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

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

// printEvents writes a job's events a line each, and under each ROUTED
// its routing explanation as a table: every candidate with its score and
// its terms, every agent ruled out with the reason, and why there was no
// candidate when there was none.
func printEvents(w io.Writer, evs []client.Event) error {
	var namespace, capability string
	fmt.Fprintf(w, "%3s  %-12s  %-18s  %s\n", "#", "AT", "EVENT", "DATA")
	for _, e := range evs {
		if e.Type == "SUBMITTED" {
			var d struct {
				Namespace  string `json:"namespace"`
				Capability string `json:"capability"`
			}
			_ = json.Unmarshal(e.Data, &d)
			namespace, capability = d.Namespace, d.Capability
		}
		if e.Type != "ROUTED" {
			fmt.Fprintf(w, "%3d  %-12s  %-18s  %s\n", e.Version, e.RecordedAt.Format("15:04:05.000"), e.Type, shorten(string(e.Data), 100))
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
		fmt.Fprintf(w, "%3d  %-12s  %-18s  attempt %d to %s\n", e.Version, e.RecordedAt.Format("15:04:05.000"), e.Type, d.Attempt, to)
		if err := printRoute(w, d, namespace, capability); err != nil {
			return err
		}
	}
	return nil
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
