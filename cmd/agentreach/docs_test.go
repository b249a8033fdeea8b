package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
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

// TestArchitectureNamesExist: every Go name docs/architecture.md gives in
// backquotes (a function, a method, a type: `Service.dispatch`,
// `domain.Job.Apply`, `decodeJSON`) is declared in this repository, so the
// walk through the code cannot name what a change removed or renamed. The
// few names of River's it gives are listed here.
func TestArchitectureNamesExist(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	declared, packages := goDeclarations(t, root)
	external := map[string]bool{"InsertManyTx": true, "InsertTx": true, "JobCompleteTx": true, "JobCancel": true, "JobSnooze": true, "JobGetTx": true}
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	require.NoError(t, err)
	code := regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\\(\\))?`")
	camel := regexp.MustCompile(`^(?:[a-z]+[A-Z]|[A-Z][a-z])[A-Za-z0-9]*$`)
	fileExt := map[string]bool{"go": true, "md": true, "sql": true, "html": true, "js": true, "css": true, "json": true, "yaml": true, "py": true, "ts": true}
	checked := 0
	for _, m := range code.FindAllStringSubmatch(string(b), -1) {
		parts := strings.Split(m[1], ".")
		last := parts[len(parts)-1]
		switch {
		case len(parts) == 1 && !camel.MatchString(last):
			continue // a word, a column, an event type: not a Go name
		case len(parts) > 1 && (!packages[parts[0]] && !declared[parts[0]] || fileExt[last]):
			continue // a file name (`jobs.go`), a JSON path: not a Go name
		}
		checked++
		if !declared[last] && !external[last] {
			t.Errorf("docs/architecture.md names %s, which nothing declares", m[1])
		}
	}
	require.Greater(t, checked, 50, "the page names the functions of a job's walk")
}

// goDeclarations are the names the repository's Go code declares
// (functions, methods, types, fields, constants, variables) and its
// package names.
func goDeclarations(t *testing.T, root string) (names, packages map[string]bool) {
	t.Helper()
	names, packages = map[string]bool{}, map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "tools" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		packages[f.Name.Name] = true
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				names[n.Name.Name] = true
			case *ast.TypeSpec:
				names[n.Name.Name] = true
			case *ast.ValueSpec:
				for _, id := range n.Names {
					names[id.Name] = true
				}
			case *ast.Field:
				for _, id := range n.Names {
					names[id.Name] = true
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	return names, packages
}
