package main

import (
	"path/filepath"
	"testing"
)

// mcpJSSuite is the MCP TypeScript SDK suite: a Node project with its own
// package.json and package-lock.json.
var mcpJSSuite = filepath.Join("..", "..", "mcp", "jsconformance")

// TestMCPJavaScriptSDK runs the MCP TypeScript SDK suite (mcp/jsconformance)
// against a fresh service: the official @modelcontextprotocol/sdk client
// lists the capabilities as tools and calls one inline and as a task, and
// an MCP server built with it, registered as an agent, serves a job
// submitted over REST.
func TestMCPJavaScriptSDK(t *testing.T) {
	t.Parallel()
	runNodeSuite(t, mcpJSSuite, "@modelcontextprotocol/sdk", "the MCP TypeScript SDK suite")
}
