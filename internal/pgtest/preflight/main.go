// Command preflight checks, before `make test`, that the test server
// answers and has room for the suite, and says in one line what is wrong
// when it has not.
//
//	go run ./internal/pgtest/preflight -need 45
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/sql/queries"
)

var qFreeConnections = queries.Must("PreflightFreeConnections")

func main() {
	need := flag.Int("need", 45, "free connections the test suite needs")
	flag.Parse()
	if err := check(*need); err != nil {
		fmt.Fprintln(os.Stderr, "make test:", err)
		os.Exit(1)
	}
}

func check(need int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(pgtest.AdminURL())
	if err != nil {
		return fmt.Errorf("PGTEST_ADMIN_URL is not a PostgreSQL URL")
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		// pgx lists every address it tried, one a line: the last says why.
		lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
		last := strings.TrimSpace(lines[len(lines)-1])
		return fmt.Errorf("PostgreSQL is not reachable as %s on %s:%d (%s): "+
			"run `bash .ci/run` once to install and start it, or set PGTEST_ADMIN_URL", cfg.User, cfg.Host, cfg.Port, last)
	}
	defer conn.Close(ctx)
	var free int
	err = conn.QueryRow(ctx, qFreeConnections).Scan(&free)
	if err != nil {
		return fmt.Errorf("ask the server for its free connections: %w", err)
	}
	if free < need {
		return fmt.Errorf("the server has %d free connections and the tests need %d: "+
			"stop what holds them (a `make run` with a busy pool, say) or raise max_connections", free, need)
	}
	return nil
}
