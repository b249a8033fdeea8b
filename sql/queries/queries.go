// Package queries holds every SQL statement the service runs outside the
// event store, as named blocks in the .sql files of this folder, embedded
// into the binary.
//
// A file holds blocks in sqlc's notation:
//
//	-- name: ClaimSlot
//	-- A comment saying what the query is for.
//	UPDATE agent_slots SET ...
//
// A package takes the statements it runs once, at initialisation:
//
//	var qClaimSlot = queries.Must("ClaimSlot")
//
// so a name that is not in any file stops the program before it serves. The
// package's test prepares every query against a freshly migrated database, so
// a statement that names an unknown table or column, or does not parse,
// fails `make test`. A block marked `:template` (`-- name: CreateDatabase
// :template`) holds a %s for an identifier the caller sanitises; it is
// checked only for its name.
package queries

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.sql
var files embed.FS

// Query is one named statement.
type Query struct {
	Name     string
	File     string
	SQL      string
	Template bool // holds a %s filled with a sanitised identifier
}

var all = load(files)

// load parses every file; a malformed file is a build mistake and panics.
func load(fsys fs.FS) map[string]Query {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		panic(err)
	}
	out := map[string]Query{}
	for _, file := range names {
		body, err := fs.ReadFile(fsys, file)
		if err != nil {
			panic(err)
		}
		qs, err := parse(file, string(body))
		if err != nil {
			panic(err)
		}
		for _, q := range qs {
			if prev, dup := out[q.Name]; dup {
				panic(fmt.Sprintf("queries: %s is named in both %s and %s", q.Name, prev.File, q.File))
			}
			out[q.Name] = q
		}
	}
	return out
}

// parse splits one file into its named blocks. Text before the first name is
// the file's own comment and is dropped.
func parse(file, body string) ([]Query, error) {
	var out []Query
	var cur *Query
	var sqlLines []string
	flush := func() error {
		if cur == nil {
			return nil
		}
		cur.SQL = strings.TrimSpace(strings.Join(sqlLines, "\n"))
		if cur.SQL == "" {
			return fmt.Errorf("queries: %s: %s has no statement", file, cur.Name)
		}
		out = append(out, *cur)
		return nil
	}
	for i, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "-- name:")
		if !ok {
			if cur != nil && !strings.HasPrefix(strings.TrimSpace(line), "--") {
				sqlLines = append(sqlLines, line)
			}
			continue
		}
		if err := flush(); err != nil {
			return nil, err
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 || len(fields) > 2 || (len(fields) == 2 && fields[1] != ":template") {
			return nil, fmt.Errorf("queries: %s:%d: want `-- name: Name` or `-- name: Name :template`", file, i+1)
		}
		cur = &Query{Name: fields[0], File: file, Template: len(fields) == 2}
		sqlLines = nil
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// Must returns the statement named name, and panics when no file names it.
// Call it from a package-level var so a wrong name fails at start-up.
func Must(name string) string {
	q, ok := all[name]
	if !ok {
		panic("queries: no query named " + name)
	}
	return q.SQL
}

// All returns every query, sorted by name.
func All() []Query {
	out := make([]Query, 0, len(all))
	for _, q := range all {
		out = append(out, q)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out
}
