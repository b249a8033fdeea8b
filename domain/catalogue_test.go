package domain

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An entry's input schema: the operator's wins; else the newest
// registration's; a disagreement is a warning, never an error.
func TestCatalogueInputSchema(t *testing.T) {
	s1, s2, op := json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`),
		json.RawMessage(`{"type":"object","properties":{"b":{"type":"number"}}}`), json.RawMessage(`{"type":"object"}`)
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	agent := func(id string, mins int, schema json.RawMessage) CatalogueAgent {
		a := CatalogueAgent{ID: id, Capabilities: []string{"c"}, RegisteredAt: at.Add(time.Duration(mins) * time.Minute)}
		if schema != nil {
			a.Docs = map[string]CapabilityDoc{"c": {InputSchema: schema}}
		}
		return a
	}
	for _, c := range []struct {
		name    string
		agents  []CatalogueAgent
		note    json.RawMessage
		want    json.RawMessage
		warning string
	}{
		{"none", []CatalogueAgent{agent("a", 0, nil)}, nil, nil, ""},
		{"one", []CatalogueAgent{agent("a", 0, s1), agent("b", 5, nil)}, nil, s1, ""},
		{"agreeing", []CatalogueAgent{agent("a", 0, s1), agent("b", 5, json.RawMessage(`{"properties":{"a":{"type":"string"}},"type":"object"}`))}, nil,
			json.RawMessage(`{"properties":{"a":{"type":"string"}},"type":"object"}`), ""},
		{"newest wins", []CatalogueAgent{agent("b", 9, s2), agent("a", 0, s1)}, nil, s2, "the newest registration's (agent b)"},
		{"newest wins, sorted after", []CatalogueAgent{agent("a", 9, s2), agent("b", 0, s1)}, nil, s2, "the newest registration's (agent a)"},
		{"operator wins", []CatalogueAgent{agent("a", 0, s1)}, op, op, "the operator's is used"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var notes []CapabilityNote
			if c.note != nil {
				notes = []CapabilityNote{{Capability: "c", Doc: CapabilityDoc{InputSchema: c.note}}}
			}
			cat := BuildCatalogue("ns", 1, c.agents, notes)
			e, ok := cat.Entry("c")
			require.True(t, ok)
			require.Equal(t, string(c.want), string(e.InputSchema))
			if c.warning == "" {
				require.Empty(t, e.SchemaWarning)
			} else {
				require.Contains(t, e.SchemaWarning, c.warning)
			}
		})
	}
	for _, bad := range []string{`[]`, `{"type":"string"}`, `{"properties":{}}`, `"x"`} {
		d := CapabilityDoc{InputSchema: json.RawMessage(bad)}
		err := d.Normalize("capability_info[c]")
		var fe *FieldError
		require.True(t, errors.As(err, &fe), bad)
		require.Equal(t, "capability_info[c].input_schema", fe.Field)
	}
	d := CapabilityDoc{InputSchema: json.RawMessage(`null`)}
	require.NoError(t, d.Normalize(""))
	require.Nil(t, d.InputSchema)
	require.True(t, d.Empty())
}
