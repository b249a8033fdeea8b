package jobstore

import (
	"context"
	"testing"
)

// TestWriterStopsOnce: when the service's context ends, its write workers
// all stop, and the writer says so once (a second close would panic),
// whatever order they stop in.
func TestWriterStopsOnce(t *testing.T) {
	t.Parallel()
	for range 2000 {
		s := &Store{}
		ctx, cancel := context.WithCancel(context.Background())
		s.StartWriter(ctx, 4)
		cancel()
		<-s.writer.stopped // closed, and only once
	}
}
