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
	link := regexp.MustCompile(`\]\(([^)#\s]+)[^)]*\)`)
	absRoot, err := filepath.Abs(root)
	require.NoError(t, err)
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		require.NotContains(t, string(b), "../shared", page)
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, err := filepath.Abs(filepath.Join(filepath.Dir(page), target))
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(path, absRoot+string(filepath.Separator)), "%s links outside the repository: %s", page, target)
			require.FileExists(t, path, "%s links to %s", page, target)
		}
	}
}
