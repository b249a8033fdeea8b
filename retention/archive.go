package retention

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	arsql "github.com/agentreach/agentreach/sql"
)

// ErrNoArchive is a folder that holds no archived partition.
var ErrNoArchive = errors.New("no archive")

// The archive: before a partition of the log is dropped, its events are
// written to <dir>/<partition>.jsonl.gz, one JSON object a line in log
// order, and then <dir>/<partition>.manifest.json says what the file holds
// and its SHA-256. The manifest is written last, each file to a temporary
// name first and renamed once synced: a partition with a manifest is
// archived whole; one without is written again from the start (same
// events, same order), so a crash leaves neither gaps nor duplicates.

// ArchiveFormat names the format of the archive's files.
const ArchiveFormat = "agentreach-archive/1"

// Manifest describes one archived partition.
type Manifest struct {
	Format    string `json:"format"`
	Partition string `json:"partition"`
	// Database names the database the partition was dropped from (its
	// cluster's system identifier and its name): an archive folder shared
	// by two databases never passes one's partition off as the other's.
	Database string    `json:"database"`
	Low      time.Time `json:"low"`
	High     time.Time `json:"high"`
	// File is the events' file, beside the manifest.
	File string `json:"file"`
	// Fields are each line's, in the order written.
	Fields []string `json:"fields"`
	Events int      `json:"events"`
	// Streams is how many streams (jobs) the events belong to.
	Streams       int       `json:"streams"`
	FirstPosition int64     `json:"first_position"`
	LastPosition  int64     `json:"last_position"`
	SHA256        string    `json:"sha256"`
	WrittenAt     time.Time `json:"written_at"`
}

// TimeRange is the submit times of the jobs the partition held.
func (m Manifest) TimeRange() domain.TimeRange { return domain.TimeRange{Low: m.Low, High: m.High} }

// ArchivedEvent is one line of an archive's file: an event as the log
// held it (tx_id is the writing transaction's, kept for the audit).
type ArchivedEvent struct {
	Position   int64           `json:"position"`
	TxID       string          `json:"tx_id"`
	StreamID   string          `json:"stream_id"`
	Version    int             `json:"version"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data"`
	Metadata   json.RawMessage `json:"metadata"`
	RecordedAt time.Time       `json:"recorded_at"`
}

var archivedFields = []string{"position", "tx_id", "stream_id", "version", "type", "data", "metadata", "recorded_at"}

const manifestSuffix = ".manifest.json"

// archive writes p, detached, to the configured archive, or finds it
// written.
func (s *Service) archive(ctx context.Context, p arsql.EventPartition) (string, error) {
	var db string
	if err := s.pool.QueryRow(ctx, qDatabaseIdentity).Scan(&db); err != nil {
		return "", fmt.Errorf("archive partition %s: %w", p.Name, err)
	}
	m, err := WriteArchive(ctx, s.store, s.cfg.ArchiveDir, db, p.Name, p.TimeRange)
	if err != nil {
		return "", fmt.Errorf("archive partition %s: %w", p.Name, err)
	}
	return filepath.Join(s.cfg.ArchiveDir, m.File), nil
}

// WriteArchive writes the events of the table name (a partition of the
// log, detached so that nothing changes it meanwhile), the jobs submitted
// in r, of the database db, to dir, and answers its manifest. A partition
// archived already (its manifest names this database and this range, its
// file matches it, and it holds the table's events) is not written again;
// a manifest of the same name from another database is an error.
func WriteArchive(ctx context.Context, store *eventstore.Store, dir, db, name string, r domain.TimeRange) (Manifest, error) {
	if m, err := readManifest(filepath.Join(dir, name+manifestSuffix)); err == nil {
		if m.Database != db {
			return Manifest{}, fmt.Errorf("%s holds a partition %s of another database (%s), not of %s: give each database an archive folder of its own",
				dir, name, m.Database, db)
		}
		n, first, last, err := store.Held(ctx, name, r)
		if err != nil {
			return Manifest{}, err
		}
		if m.Low.Equal(r.Low) && m.High.Equal(r.High) && m.Events == n && m.FirstPosition == first && m.LastPosition == last &&
			verifyFile(dir, m) == nil {
			return m, nil
		}
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return Manifest{}, err
	}
	m := Manifest{Format: ArchiveFormat, Partition: name, Database: db, Low: r.Low.UTC(), High: r.High.UTC(), File: name + ".jsonl.gz",
		Fields: archivedFields}
	sum := sha256.New()
	err := writeAtomically(filepath.Join(dir, m.File), func(f io.Writer) error {
		return writeEvents(ctx, store, io.MultiWriter(f, sum), name, r, &m)
	})
	if err != nil {
		return Manifest{}, err
	}
	m.SHA256, m.WrittenAt = hex.EncodeToString(sum.Sum(nil)), time.Now().UTC()
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, err
	}
	err = writeAtomically(filepath.Join(dir, name+manifestSuffix), func(f io.Writer) error {
		_, err := f.Write(append(body, '\n'))
		return err
	})
	return m, err
}

// writeEvents writes the events of the jobs submitted in r that table
// holds, in log order, gzipped, to w, counting them into m.
func writeEvents(ctx context.Context, store *eventstore.Store, w io.Writer, table string, r domain.TimeRange, m *Manifest) error {
	zw := gzip.NewWriter(w)
	enc := json.NewEncoder(zw)
	streams := map[string]struct{}{}
	err := store.ReadSubmitted(ctx, table, r, func(e eventstore.StoredEvent) error {
		if m.Events == 0 {
			m.FirstPosition = e.Position
		}
		m.Events, m.LastPosition = m.Events+1, e.Position
		streams[e.StreamID] = struct{}{}
		return enc.Encode(ArchivedEvent{Position: e.Position, TxID: strconv.FormatUint(e.TxID, 10), StreamID: e.StreamID,
			Version: e.Version, Type: e.Type, Data: e.Data, Metadata: e.Metadata, RecordedAt: e.RecordedAt.UTC()})
	})
	if err != nil {
		return err
	}
	m.Streams = len(streams)
	return zw.Close()
}

// writeAtomically writes path through a temporary file that is synced
// and then renamed over it, and syncs the folder.
func writeAtomically(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp") // a name of its own: two writers never share one
	if err != nil {
		return err
	}
	tmp := f.Name()
	bw := bufio.NewWriterSize(f, 1<<16)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func readManifest(path string) (Manifest, error) {
	var m Manifest
	body, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	if m.Format != ArchiveFormat {
		return m, fmt.Errorf("%s: format %q, not %s", path, m.Format, ArchiveFormat)
	}
	if m.File == "" || strings.ContainsAny(m.File, `/\`) {
		return m, fmt.Errorf("%s: file %q is not a file beside it", path, m.File)
	}
	return m, nil
}

// Manifests reads every manifest of the archive in dir, oldest partition
// first.
func Manifests(dir string) ([]Manifest, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+manifestSuffix))
	if err != nil {
		return nil, err
	}
	var out []Manifest
	for _, p := range paths {
		m, err := readManifest(p)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Low.Before(out[j].Low) })
	return out, nil
}

// VerifyArchive checks every partition of the archive in dir against its
// manifest (checksum, events, order) and answers the manifests; the first
// mismatch is an error naming the partition.
func VerifyArchive(dir string) ([]Manifest, error) {
	ms, err := Manifests(dir)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%w in %s: no *%s file", ErrNoArchive, dir, manifestSuffix)
	}
	for _, m := range ms {
		if err := verifyFile(dir, m); err != nil {
			return nil, fmt.Errorf("partition %s: %w", m.Partition, err)
		}
	}
	return ms, nil
}

// verifyFile checks m's file: its checksum, then its events.
func verifyFile(dir string, m Manifest) error {
	n, last := 0, int64(0)
	return readEvents(dir, m, func(e ArchivedEvent) error {
		if e.Position <= last {
			return fmt.Errorf("event at position %d follows %d: out of order", e.Position, last)
		}
		n, last = n+1, e.Position
		return nil
	}, func() error {
		if n != m.Events {
			return fmt.Errorf("%d events where the manifest says %d", n, m.Events)
		}
		return nil
	})
}

// readEvents calls fn for each event of m's file, then end, and checks
// the file's checksum once it is read whole.
func readEvents(dir string, m Manifest, fn func(ArchivedEvent) error, end func() error) error {
	f, err := os.Open(filepath.Join(dir, m.File))
	if err != nil {
		return err
	}
	defer f.Close()
	sum := sha256.New()
	zr, err := gzip.NewReader(io.TeeReader(f, sum))
	if err != nil {
		return fmt.Errorf("%s: %w", m.File, err)
	}
	dec := json.NewDecoder(zr)
	for {
		var e ArchivedEvent
		err := dec.Decode(&e)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m.File, err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if _, err := io.Copy(sum, f); err != nil { // what the decompressor left unread
		return err
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != m.SHA256 {
		return fmt.Errorf("%s: SHA-256 %s where the manifest says %s", m.File, got, m.SHA256)
	}
	return end()
}
