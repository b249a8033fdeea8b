package card_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/a2a"
	"github.com/agentreach/agentreach/a2a/card"
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
