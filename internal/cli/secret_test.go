package cli_test

import (
	"bytes"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/cli"
)

func TestSecretVarNeverShowsItsValue(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	var key string
	cli.SecretVar(fs, &key, "key", "ar_from_the_environment", "API key (env AGENTREACH_KEY)")
	fs.PrintDefaults()
	require.Contains(t, out.String(), "API key (env AGENTREACH_KEY)")
	require.NotContains(t, out.String(), "ar_from_the_environment")
	require.Equal(t, "ar_from_the_environment", key, "the environment's value is kept")
	require.NoError(t, fs.Parse([]string{"-key", "ar_from_the_flag"}))
	require.Equal(t, "ar_from_the_flag", key)
}
