package card_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/a2a"
	"github.com/agentreach/agentreach/a2a/card"
	"github.com/agentreach/agentreach/domain"
)

func TestCardMap(t *testing.T) {
	t.Parallel()
	v03 := `{"name":"Calc","version":"1.2.0","url":"http://calc.example/rpc","preferredTransport":"JSONRPC",
		"capabilities":{"pushNotifications":true},
		"skills":[{"id":"math.add","tags":["math","add ition","math.add"]},{"id":"bad id"},{"id":"math.mul","tags":["math"]}]}`
	c, err := card.Parse([]byte(v03))
	require.NoError(t, err)
	m, err := card.Map(c)
	require.NoError(t, err)
	require.Equal(t, []string{"math.add", "math.mul"}, m.Capabilities)
	require.Equal(t, []string{"math"}, m.Aliases)
	require.Equal(t, "http://calc.example/rpc", m.Endpoint)
	require.Equal(t, "1.2.0", m.Version)
	require.True(t, m.Push)

	v1 := `{"name":"N","version":"2","supportedInterfaces":[{"url":"grpc://x","protocolBinding":"GRPC"},{"url":"http://n.example/a2a","protocolBinding":"JSONRPC"}],
		"skills":[{"id":"n.s","tags":[]}]}`
	c, err = card.Parse([]byte(v1))
	require.NoError(t, err)
	m, err = card.Map(c)
	require.NoError(t, err)
	require.Equal(t, "http://n.example/a2a", m.Endpoint)
	require.NotEqual(t, m.Hash(), (card.Mapping{}).Hash())

	for _, bad := range []string{`{"url":"http://x","skills":[]}`, `{"url":"http://x","skills":[{"id":"no good"}]}`,
		`{"url":"http://x","preferredTransport":"GRPC","skills":[{"id":"a"}]}`} {
		c, err := card.Parse([]byte(bad))
		require.NoError(t, err)
		_, err = card.Map(c)
		require.ErrorIs(t, err, card.ErrCard, bad)
	}
}

func TestCardURLs(t *testing.T) {
	t.Parallel()
	urls, err := card.URLs("http://h:1/agents/x/")
	require.NoError(t, err)
	require.Equal(t, []string{"http://h:1/agents/x" + a2a.CardPath, "http://h:1/agents/x" + a2a.LegacyCardPath}, urls)
	urls, err = card.URLs("https://h/card.json")
	require.NoError(t, err)
	require.Equal(t, []string{"https://h/card.json"}, urls)
	_, err = card.URLs("ftp://h/x")
	require.ErrorIs(t, err, card.ErrCard)
}

// TestCardMapDocs: each skill's name, description, examples and tags are
// the catalogue's words of its capability, clipped to the limits; a change
// of them changes the fingerprint, and a card whose skills say nothing
// fingerprints as before the catalogue existed.
func TestCardMapDocs(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("长", domain.MaxDocDescription+10)
	raw := `{"name":"Parcels","url":"http://p.example/rpc","skills":[
		{"id":"parcel.track","name":"Track a parcel","description":"Where a parcel is","tags":["shipping","物流"],
		 "examples":["where is my parcel","我的包裹在哪里"]},
		{"id":"parcel.return","description":"` + long + `"},
		{"id":"parcel.quiet"}]}`
	c, err := card.Parse([]byte(raw))
	require.NoError(t, err)
	m, err := card.Map(c)
	require.NoError(t, err)
	require.Equal(t, domain.CapabilityDoc{Title: "Track a parcel", Description: "Where a parcel is", Tags: []string{"shipping", "物流"},
		Examples: []string{"where is my parcel", "我的包裹在哪里"}}, m.Docs["parcel.track"])
	require.Equal(t, domain.MaxDocDescription, utf8.RuneCountInString(m.Docs["parcel.return"].Description), "clipped, not refused")
	_, ok := m.Docs["parcel.quiet"]
	require.False(t, ok, "a skill that says nothing has no doc")

	c.Skills[0].Examples = append(c.Skills[0].Examples, "has it shipped")
	m2, err := card.Map(c)
	require.NoError(t, err)
	require.NotEqual(t, m.Hash(), m2.Hash(), "new examples are a changed card")

	bare := card.Mapping{Name: "x", Capabilities: []string{"a"}}
	withEmpty := bare
	withEmpty.Docs = map[string]domain.CapabilityDoc{}
	require.Equal(t, bare.Hash(), withEmpty.Hash())
	b, err := json.Marshal(bare)
	require.NoError(t, err)
	require.NotContains(t, string(b), "Docs", "the fingerprint of a card without docs is as it was")
}
