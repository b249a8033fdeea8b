//go:build !unix

package devdb

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
)

// cluster is a private PostgreSQL cluster; not supported on this platform.
type cluster struct{ addr string }

func startCluster(ctx context.Context, initdb, pgctl, dataDir string, log *slog.Logger) (*cluster, error) {
	return nil, errors.New("starting a private PostgreSQL cluster is not supported on " + runtime.GOOS)
}

func (c *cluster) stop() error { return nil }

func (c *cluster) baseBackup(context.Context, string) error {
	return errors.New("devdb: base backups need a unix system")
}
