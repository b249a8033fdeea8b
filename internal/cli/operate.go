package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// Operate runs an operator's action on an agent:
//
//	agentreach agents drain|down|up AGENT_ID [--reason TEXT] [--namespace NS]
//	agentreach agents update AGENT_ID [--weight N] [--rollout-percent N] [--max-concurrent N] [--aliases a,b]
func Operate(ctx context.Context, env Env, action string, args []string) error {
	fs, c := APIFlags(env, "agents "+action)
	usageWith(fs, agentsHelp)
	ns := fs.String("namespace", "", "the agent's namespace, when its id is in several")
	reason := fs.String("reason", "", "why, recorded with the action")
	weight := fs.Int("weight", 0, "update: routing weight, 1-100")
	rollout := fs.Int("rollout-percent", -1, "update: the canary share, 0-100")
	maxConc := fs.Int("max-concurrent", -1, "update: slots, 0 = unlimited")
	aliases := fs.String("aliases", "", "update: comma-separated aliases (replaces them)")
	pos, err := fs.ParsePositional(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return UsageMistake(fs.FlagSet, fmt.Errorf("%w: agentreach agents %s AGENT_ID [flags]", ErrUsage, action))
	}
	path := "/v1/agents/" + url.PathEscape(pos[0])
	method, body := http.MethodPost, map[string]any{}
	switch action {
	case "drain", "down", "up":
		path += "/" + action
		if *reason != "" {
			body["reason"] = *reason
		}
	case "update":
		method = http.MethodPatch
		set := func(k string, v any, given bool) {
			if given {
				body[k] = v
			}
		}
		set("weight", *weight, *weight != 0)
		set("rollout_percent", *rollout, *rollout >= 0)
		set("max_concurrent", *maxConc, *maxConc >= 0)
		set("aliases", SplitList(*aliases), *aliases != "")
		if len(body) == 0 {
			return UsageMistake(fs.FlagSet, fmt.Errorf("%w: agentreach agents update AGENT_ID needs --weight, --rollout-percent, --max-concurrent or --aliases", ErrUsage))
		}
	default:
		return fmt.Errorf("%w: agentreach agents [drain|down|up|update AGENT_ID]", ErrUsage)
	}
	if *ns != "" {
		path += "?namespace=" + url.QueryEscape(*ns)
	}
	var raw json.RawMessage
	if err := c.Do(ctx, method, path, body, &raw); err != nil {
		return namespaceHint(err)
	}
	if fs.JSON {
		return PrintRaw(env.Stdout, raw)
	}
	var a agentView
	if err := json.Unmarshal(raw, &a); err != nil {
		return fmt.Errorf("the service's agent: %w", err)
	}
	hold := ""
	if a.Hold != "" {
		hold = " (operator hold: " + a.Hold + ")"
	}
	_, err = fmt.Fprintf(env.Stdout, "%s: %s%s, weight %d, max_concurrent %s\n", a.AgentID, env.paletteFor(env.Stdout, false).word(a.State, a.State), hold, a.Weight, maxText(a.MaxConcurrent))
	return err
}
