package devdb

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

// defaultBinGlobs are searched after PATH, highest version first.
var defaultBinGlobs = []string{
	"/usr/lib/postgresql/*/bin", // Debian, Ubuntu
	"/usr/pgsql-*/bin",          // PGDG RPMs (RHEL, Fedora)
}

// FindServerBinaries returns the paths of initdb and pg_ctl, taken from the
// same folder. It searches the extra folders first, then PATH, then
// /usr/lib/postgresql/*/bin and /usr/pgsql-*/bin (highest version first).
// Tests can use it to skip when no PostgreSQL server is installed.
func FindServerBinaries(extra []string) (initdb, pgctl string, err error) {
	return findServerBinaries(extra, true)
}

func findServerBinaries(extra []string, defaults bool) (initdb, pgctl string, err error) {
	dirs := append([]string(nil), extra...)
	if defaults {
		dirs = append(dirs, filepath.SplitList(os.Getenv("PATH"))...)
		for _, g := range defaultBinGlobs {
			dirs = append(dirs, globByVersion(g)...)
		}
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		i, p := filepath.Join(dir, exe("initdb")), filepath.Join(dir, exe("pg_ctl"))
		if isExecutable(i) && isExecutable(p) {
			return i, p, nil
		}
	}
	where := "in " + strings.Join(extra, ", ")
	if defaults {
		where = "in " + strings.Join(append(append([]string(nil), extra...), "PATH"), ", ") +
			" or " + strings.Join(defaultBinGlobs, ", ")
	} else if len(extra) == 0 {
		where = "(no folders to search)"
	}
	return "", "", errors.New("PostgreSQL server binaries initdb and pg_ctl not found " + where)
}

// globByVersion expands pattern, whose single "*" is a version number, and
// orders the matches highest version first.
func globByVersion(pattern string) []string {
	matches, _ := filepath.Glob(pattern)
	prefix, suffix, _ := strings.Cut(pattern, "*")
	version := func(m string) []int {
		v := strings.TrimSuffix(strings.TrimPrefix(m, prefix), suffix)
		var out []int
		for _, part := range strings.Split(v, ".") {
			n, err := strconv.Atoi(part)
			if err != nil {
				n = -1
			}
			out = append(out, n)
		}
		return out
	}
	sort.SliceStable(matches, func(a, b int) bool {
		va, vb := version(matches[a]), version(matches[b])
		for i := 0; i < len(va) && i < len(vb); i++ {
			if va[i] != vb[i] {
				return va[i] > vb[i]
			}
		}
		return len(va) > len(vb)
	})
	return matches
}

func exe(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	return runtime.GOOS == "windows" || fi.Mode().Perm()&0o111 != 0
}
