package client_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGuideFragmentsCompile: every Go fragment of docs/guide.md and of
// the agent SDK's package documentation compiles against the SDK (go vet of a program made of it, the names it takes
// from the prose declared), so the guide cannot drift from the API.
func TestGuideFragmentsCompile(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the test vets the fragments with go")
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "guide.md"))
	require.NoError(t, err)
	var fragments []string
	for _, f := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(guide), -1) {
		fragments = append(fragments, regexp.MustCompile(`(?m)^  `).ReplaceAllString(f[1], ""))
	}
	require.NotEmpty(t, fragments, "docs/guide.md has Go fragments")
	// And the agent SDK's package documentation (sdk/doc.go): its code
	// blocks are the comment lines indented by a tab.
	doc, err := os.ReadFile(filepath.Join("..", "doc.go"))
	require.NoError(t, err)
	for _, f := range regexp.MustCompile(`(?m)(?:^//\t.*\n)+`).FindAllString(string(doc), -1) {
		fragments = append(fragments, regexp.MustCompile(`(?m)^//\t`).ReplaceAllString(f, ""))
	}
	assigned := regexp.MustCompile(`(?m)^\s*([\w, ]+?)\s*:=`)
	for i, f := range fragments {
		var body, uses strings.Builder
		for _, line := range strings.Split(f, "\n") {
			body.WriteString("\t" + line + "\n")
		}
		for _, m := range assigned.FindAllStringSubmatch(f, -1) {
			for _, name := range strings.Split(m[1], ",") {
				if name = strings.TrimSpace(name); name != "_" {
					uses.WriteString("\t_ = " + name + "\n")
				}
			}
		}
		// A directory starting with "_" is left out of ./... patterns: a
		// concurrent go vet ./... never sees it.
		dir, err := os.MkdirTemp(".", "_guidefragment")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		src := "package main\n\nimport (\n\t\"context\"\n\n\t\"github.com/agentreach/agentreach/sdk\"\n\t\"github.com/agentreach/agentreach/sdk/client\"\n)\n\n" +
			"var _ = client.New\n\nfunc handler(context.Context, sdk.Delivery) (sdk.Result, error) { return sdk.Success(nil), nil }\n\n" +
			"func main() {\n\tctx, key, doc := context.Background(), \"\", map[string]any{}\n\t_, _, _ = ctx, key, doc\n" + body.String() + uses.String() + "}\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))
		out, err := exec.CommandContext(t.Context(), goBin, "vet", "./"+filepath.Base(dir)).CombinedOutput()
		require.NoError(t, err, "Go fragment %d of the docs (docs/guide.md, then sdk/doc.go) does not compile:\n%s\n%s", i+1, src, out)
	}
}
