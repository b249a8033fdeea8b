package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsLinksStayInTheRepository: every relative link of the README and
// of docs/ names a file of this repository, so a clone has every page it is
// sent to (none outside it, such as ../shared).
func TestDocsLinksStayInTheRepository(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	pages = append(pages, filepath.Join(root, "README.md"))
	for _, want := range []string{"design.md", "api.md", "security.md", "architecture.md"} {
		require.FileExists(t, filepath.Join(root, "docs", want))
	}
	link := regexp.MustCompile(`\]\(([^)#\s]*)(#[^)\s]*)?\)`)
	absRoot, err := filepath.Abs(root)
	require.NoError(t, err)
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		require.NotContains(t, string(b), "../shared", page)
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target, anchor := m[1], strings.TrimPrefix(m[2], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if target == "" {
				target = filepath.Base(page)
			}
			if anchor != "" && strings.HasSuffix(target, ".md") {
				md, err := os.ReadFile(filepath.Join(filepath.Dir(page), target))
				require.NoError(t, err, "%s links to %s", page, target)
				require.Contains(t, anchors(string(md)), anchor, "%s links to %s#%s, a heading it does not have", page, target, anchor)
			}
			path, err := filepath.Abs(filepath.Join(filepath.Dir(page), target))
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(path, absRoot+string(filepath.Separator)), "%s links outside the repository: %s", page, target)
			_, err = os.Stat(path) // a file or a directory of the repository
			require.NoError(t, err, "%s links to %s", page, target)
		}
	}
}

// anchors are the GitHub anchors of a Markdown page's headings.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	for _, line := range strings.Split(md, "\n") {
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
		}
	}
	return out
}
