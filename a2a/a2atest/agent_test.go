package a2atest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/a2a/a2atest"
	"github.com/agentreach/agentreach/a2a/card"
)

func TestAgent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, err := a2atest.Start(ctx, a2atest.Options{Name: "Echo Test", Skills: []string{"t.echo"}, Version: "9"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })

	// Its card is one Agent-Reach registers.
	f, m, err := card.Resolve(ctx, http.DefaultClient, a.URL)
	require.NoError(t, err)
	require.Equal(t, a.URL+"/.well-known/agent-card.json", f.URL)
	require.Equal(t, []string{"t.echo"}, m.Capabilities)
	require.Equal(t, a.URL+"/", m.Endpoint)
	require.Equal(t, "echo-test", card.AgentID(m.Name))

	c, err := agentcard.DefaultResolver.Resolve(ctx, a.URL)
	require.NoError(t, err)
	client, err := a2aclient.NewFromCard(ctx, c)
	require.NoError(t, err)
	res, err := client.SendMessage(ctx, &sdk.MessageSendParams{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.DataPart{Data: map[string]any{"q": "ping"}})})
	require.NoError(t, err)
	task := res.(*sdk.Task)
	require.Equal(t, sdk.TaskStateCompleted, task.Status.State)
	require.Equal(t, map[string]any{"echo": map[string]any{"q": "ping"}, "by": "Echo Test"}, task.Artifacts[0].Parts[0].(sdk.DataPart).Data)

	_, err = a2atest.Start(ctx, a2atest.Options{Behaviour: "dance"})
	require.ErrorIs(t, err, a2atest.ErrBehaviour)
}

func TestRegister(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]string
		_ = json.Unmarshal(b, &body)
		if r.URL.Path != "/v1/agents" || r.Header.Get("Authorization") != "Bearer key" || body["card_url"] != "http://127.0.0.1:1" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"agent_id":"echo"}`)
	}))
	t.Cleanup(srv.Close)
	id, err := a2atest.Register(context.Background(), srv.URL+"/", "key", "http://127.0.0.1:1", "", "")
	require.NoError(t, err)
	require.Equal(t, "echo", id)
	_, err = a2atest.Register(context.Background(), srv.URL, "other", "http://127.0.0.1:1", "", "")
	require.ErrorContains(t, err, "400")
}
