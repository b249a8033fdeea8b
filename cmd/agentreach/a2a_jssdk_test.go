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

// jsSuite is the A2A JavaScript SDK suite: a Node project with its own
// package.json and package-lock.json.
var jsSuite = filepath.Join("..", "..", "a2a", "jsconformance")

// TestA2AJavaScriptSDK runs the A2A JavaScript SDK suite (a2a/jsconformance)
// against a fresh service: the official SDK from npm, @a2a-js/sdk 1.x (A2A
// v1.0) and its 0.3 line (A2A v0.3), as a client of every method of the A2A
// face in both versions (send, stream, get, cancel, resubscribe, every
// push-config method, push receipt) and as agents registered by card. It
// skips only when node is not installed; the suite's packages are
// installed (npm ci) when they are missing or older than the lock file.
func TestA2AJavaScriptSDK(t *testing.T) {
	t.Parallel()
	runNodeSuite(t, jsSuite, "@a2a-js/sdk", "the A2A JavaScript SDK suite", "--test-concurrency=4")
}

// runNodeSuite runs the *.test.mjs files of the Node project in dir (its
// packages, marked by the package named marker, installed when missing)
// against a fresh service, with node's --test and args. It skips only
// when node is not installed.
func runNodeSuite(t *testing.T, dir, marker, name string, args ...string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node is not installed, so %s (%s) cannot run: install Node 20 or later (.ci/run does)", name, dir)
	}
	dir, err = filepath.Abs(dir)
	require.NoError(t, err)
	installJSSuite(t, dir, marker)
	files, err := filepath.Glob(filepath.Join(dir, "*.test.mjs"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no *.test.mjs in %s", dir)

	svc, _ := service(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append(append([]string{"--test", "--test-reporter=spec"}, args...), files...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGENTREACH_URL="+svc.m.URL(), "NO_COLOR=1", "FORCE_COLOR=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s failed:\n%s\nAgent-Reach said:\n%s", name, out, svc.out.String())
	require.Contains(t, string(out), "ℹ fail 0", "%s", out)
	summary := string(out)
	if i := strings.LastIndex(summary, "ℹ tests"); i >= 0 {
		summary = summary[i:]
	}
	t.Logf("%s:\n%s", name, summary)
}

// installJSSuite runs npm ci in the suite's directory when its packages
// (marked by the package named marker) are not installed, or are older
// than its package-lock.json.
func installJSSuite(t *testing.T, dir, marker string) {
	t.Helper()
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	require.NoError(t, err)
	installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err == nil && !installed.ModTime().Before(lock.ModTime()) {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", marker, "package.json")); err == nil {
			return
		}
	}
	npm, err := exec.LookPath("npm")
	require.NoError(t, err, "node is installed but npm is not: it installs the JavaScript SDK suites' packages")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm ci in %s:\n%s", dir, out)
}
