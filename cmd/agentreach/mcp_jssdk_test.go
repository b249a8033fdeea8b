package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// mcpJSSuite is the MCP TypeScript SDK suite: a Node project with its own
// package.json and package-lock.json.
var mcpJSSuite = filepath.Join("..", "..", "mcp", "jsconformance")

// TestMCPJavaScriptSDK runs the MCP TypeScript SDK suite (mcp/jsconformance)
// against a fresh service: the official @modelcontextprotocol/sdk client
// lists the capabilities as tools and calls one inline and as a task. It
// skips only when node is not installed.
func TestMCPJavaScriptSDK(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed, so the MCP TypeScript SDK suite (mcp/jsconformance) cannot run: install Node 20 or later (.ci/run does)")
	}
	dir, err := filepath.Abs(mcpJSSuite)
	require.NoError(t, err)
	installJSSuite(t, dir, "@modelcontextprotocol/sdk")
	files, err := filepath.Glob(filepath.Join(dir, "*.test.mjs"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no *.test.mjs in %s", dir)

	svc, _ := service(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"--test", "--test-reporter=spec"}, files...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGENTREACH_URL="+svc.m.URL(), "NO_COLOR=1", "FORCE_COLOR=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the MCP TypeScript SDK suite failed:\n%s\nAgent-Reach said:\n%s", out, svc.out.String())
	require.Contains(t, string(out), "ℹ fail 0", "%s", out)
	summary := string(out)
	if i := strings.LastIndex(summary, "ℹ tests"); i >= 0 {
		summary = summary[i:]
	}
	t.Logf("MCP TypeScript SDK suite:\n%s", summary)
}
