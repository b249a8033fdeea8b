package jobs

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
		s := &Service{}
		ctx, cancel := context.WithCancel(context.Background())
		s.startWriter(ctx, 4)
		cancel()
		<-s.writer.stopped // closed, and only once
	}
}
