package domain

import (
	"reflect"
	"slices"
)

// AgentSettings are what an operator may change of a running agent without
// a restart (PATCH /v1/agents/{id}).
type AgentSettings struct {
	Weight         int            `json:"weight"`
	RolloutPercent int            `json:"rollout_percent"`
	MaxConcurrent  int            `json:"max_concurrent"`
	Aliases        []string       `json:"aliases"`
	Context        map[string]any `json:"context"`
	Metadata       map[string]any `json:"metadata"`
}

// SettingsOf are r's changeable settings.
func SettingsOf(r AgentRegistration) AgentSettings {
	return AgentSettings{Weight: r.Weight, RolloutPercent: r.RolloutPercent, MaxConcurrent: r.MaxConcurrent,
		Aliases: r.Aliases, Context: r.Context, Metadata: r.Metadata}
}

// AgentPatch names the settings to change; a nil field stays as it is.
type AgentPatch struct {
	Weight         *int            `json:"weight"`
	RolloutPercent *int            `json:"rollout_percent"`
	MaxConcurrent  *int            `json:"max_concurrent"`
	Aliases        *[]string       `json:"aliases"`
	Context        *map[string]any `json:"context"`
	Metadata       *map[string]any `json:"metadata"`
}

// AgentUpdated is the data of AGENT_UPDATED: the fields changed, and the
// settings before and after.
type AgentUpdated struct {
	Fields []string      `json:"fields"`
	From   AgentSettings `json:"from"`
	To     AgentSettings `json:"to"`
}

// ApplyPatch applies p to r and checks the result as a registration is
// checked (a *FieldError on bad input). It answers the new registration
// and what changed; no field changed is a patch with nothing to record
// (Fields empty).
func ApplyPatch(r AgentRegistration, p AgentPatch) (AgentRegistration, AgentUpdated, error) {
	next := r
	next.Aliases = slices.Clone(r.Aliases)
	if p.Weight != nil {
		if *p.Weight < 1 || *p.Weight > 100 {
			return r, AgentUpdated{}, fieldErr("weight", "must be between 1 and 100")
		}
		next.Weight = *p.Weight
	}
	if p.RolloutPercent != nil {
		next.RolloutPercent = *p.RolloutPercent
	}
	if p.MaxConcurrent != nil {
		next.MaxConcurrent = *p.MaxConcurrent
	}
	if p.Aliases != nil {
		next.Aliases = *p.Aliases
	}
	if p.Context != nil {
		next.Context = *p.Context
	}
	if p.Metadata != nil {
		next.Metadata = *p.Metadata
	}
	if err := next.Normalize(); err != nil {
		return r, AgentUpdated{}, err
	}
	from, to := SettingsOf(r), SettingsOf(next)
	u := AgentUpdated{From: from, To: to}
	for _, f := range []struct {
		name string
		a, b any
	}{
		{"weight", from.Weight, to.Weight}, {"rollout_percent", from.RolloutPercent, to.RolloutPercent},
		{"max_concurrent", from.MaxConcurrent, to.MaxConcurrent}, {"aliases", from.Aliases, to.Aliases},
		{"context", from.Context, to.Context}, {"metadata", from.Metadata, to.Metadata},
	} {
		if !equalSetting(f.a, f.b) {
			u.Fields = append(u.Fields, f.name)
		}
	}
	return next, u, nil
}

// equalSetting compares two values of a setting; an empty list or map
// equals a missing one.
func equalSetting(a, b any) bool {
	empty := func(v any) bool {
		rv := reflect.ValueOf(v)
		return (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Map) && rv.Len() == 0
	}
	if empty(a) && empty(b) {
		return true
	}
	return reflect.DeepEqual(a, b)
}
