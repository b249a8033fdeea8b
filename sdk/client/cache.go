package client

import (
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// grantMargin is how long before its earliest grant expires a cached
// answer stops being fresh, so that a grant served has time for its call.
const grantMargin = 10 * time.Second

// notServable are the states a cached candidate is never served in.
var notServable = map[string]bool{"SUSPECT": true, "DOWN": true, "OFFLINE": true, "DRAINING": true, "PROBING": true}

// cache holds lookup answers, least recently used out first. An entry is
// fresh until its expiry, and after that (or once the watch feed made it
// unfresh) still kept as the last known list, served only as stale when
// the registry is unreachable.
type cache struct {
	mu         sync.Mutex
	serveFresh bool
	size       int
	ll         *list.List // of *entry, most recent first
	byKey      map[string]*list.Element
	seq        uint64 // bumped by every change the watch feed applies

	file   string
	fileMu sync.Mutex // one write at a time, each of the latest state
	logger *slog.Logger
}

type entry struct {
	Key        string      `json:"key"`
	Namespace  string      `json:"namespace,omitempty"` // as asked
	FetchedAt  time.Time   `json:"fetched_at"`
	TTLMS      int64       `json:"ttl_ms"`
	WatchFrom  int64       `json:"watch_from,omitempty"`
	Candidates []Candidate `json:"candidates"`
	freshUntil time.Time   // zero: stale use only
}

// cacheFile is the CacheFile's content.
type cacheFile struct {
	Version   int       `json:"version"`
	WrittenAt time.Time `json:"written_at"`
	Lists     []*entry  `json:"lists"`
}

const cacheFileVersion = 1

func newCache(size int, file string, logger *slog.Logger) *cache {
	c := &cache{serveFresh: size > 0, size: size, ll: list.New(), byKey: map[string]*list.Element{}, file: file, logger: logger}
	if c.size <= 0 {
		c.size = 256
	}
	if file != "" {
		if err := c.load(); err != nil {
			logger.Warn("agentreach client: cache file not read; starting without it", "file", file, "err", err)
		}
	}
	return c
}

func (c *cache) sequence() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// fresh answers key's entry if it is fresh at now.
func (c *cache) fresh(key string, now time.Time) (LookupResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok || !c.serveFresh {
		return LookupResult{}, false
	}
	e := el.Value.(*entry)
	if !now.Before(e.freshUntil) || len(e.Candidates) == 0 {
		return LookupResult{}, false
	}
	c.ll.MoveToFront(el)
	return LookupResult{Candidates: slices.Clone(e.Candidates), TTL: e.freshUntil.Sub(now), FetchedAt: e.FetchedAt, Cached: true}, true
}

// watchFrom is the oldest watch_from of the fresh entries, 0 with none.
func (c *cache) watchFrom() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var from int64
	for el := c.ll.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*entry); !e.freshUntil.IsZero() && e.WatchFrom > 0 && (from == 0 || e.WatchFrom < from) {
			from = e.WatchFrom
		}
	}
	return from
}

// stale answers key's last known list, fresh or not.
func (c *cache) stale(key string) (LookupResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok || len(el.Value.(*entry).Candidates) == 0 {
		return LookupResult{}, false
	}
	e := el.Value.(*entry)
	return LookupResult{Candidates: slices.Clone(e.Candidates), FetchedAt: e.FetchedAt, Stale: true}, true
}

// store keeps ans, fetched at fetched for key, leaving out the candidates
// that must not be served from the cache. seq is the sequence when the
// request left: if the watch feed changed anything since, the answer may
// predate that change, and is kept for stale use only.
func (c *cache) store(key, namespace string, ans lookupAnswer, fetched time.Time, seq uint64) {
	if !c.serveFresh && c.file == "" {
		return
	}
	e := &entry{Key: key, Namespace: namespace, FetchedAt: fetched, TTLMS: ans.TTLMS, WatchFrom: ans.WatchFrom}
	for _, cand := range ans.Candidates {
		if !notServable[cand.State] {
			e.Candidates = append(e.Candidates, cand)
		}
	}
	e.freshUntil = freshUntil(e)
	c.mu.Lock()
	if c.seq != seq {
		e.freshUntil = time.Time{}
	}
	if len(e.Candidates) == 0 {
		if el, ok := c.byKey[key]; ok { // the registry knows none now: neither do we
			c.ll.Remove(el)
			delete(c.byKey, key)
		}
	} else {
		c.putLocked(e)
	}
	c.mu.Unlock()
	c.persist()
}

// freshUntil is when e stops being fresh: its TTL from when it was
// fetched, or any candidate's, or a grant margin before the first grant
// expires, whichever comes first.
func freshUntil(e *entry) time.Time {
	until := e.FetchedAt.Add(time.Duration(e.TTLMS) * time.Millisecond)
	for _, cand := range e.Candidates {
		if cand.TTLMS > 0 {
			until = minTime(until, e.FetchedAt.Add(time.Duration(cand.TTLMS)*time.Millisecond))
		}
		if !cand.GrantExpiresAt.IsZero() {
			until = minTime(until, cand.GrantExpiresAt.Add(-grantMargin))
		}
	}
	return until
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (c *cache) putLocked(e *entry) {
	if el, ok := c.byKey[e.Key]; ok {
		el.Value = e
		c.ll.MoveToFront(el)
		return
	}
	c.byKey[e.Key] = c.ll.PushFront(e)
	for c.ll.Len() > c.size {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.byKey, last.Value.(*entry).Key)
	}
}

// agentChanged applies one change of the watch feed. An agent that left
// HEALTHY (SUSPECT, DOWN, DRAINING, OFFLINE, PROBING after a restart) or
// deregistered is dropped from every list at once. Any other change (back
// to HEALTHY, registered, updated) may change the ranking or bring a new
// candidate, so its namespace's lists stop being fresh: the next lookup
// asks the registry, and they stay as the stale fallback. It reports
// whether it dropped a candidate.
func (c *cache) agentChanged(ch AgentChange) bool {
	drop := ch.Type == "AGENT_DEREGISTERED" || (ch.State != "" && ch.State != "HEALTHY")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	dropped := false
	for el := c.ll.Front(); el != nil; {
		next := el.Next()
		e := el.Value.(*entry)
		if drop {
			n := len(e.Candidates)
			e.Candidates = slices.DeleteFunc(slices.Clone(e.Candidates), func(cand Candidate) bool {
				return cand.AgentID == ch.AgentID && (cand.Namespace == ch.Namespace || cand.Namespace == "" || ch.Namespace == "")
			})
			dropped = dropped || len(e.Candidates) < n
			if len(e.Candidates) == 0 {
				c.ll.Remove(el)
				delete(c.byKey, e.Key)
			}
		} else if e.Namespace == "" || ch.Namespace == "" || e.Namespace == ch.Namespace {
			e.freshUntil = time.Time{}
		}
		el = next
	}
	return dropped
}

// load reads the cache file, every list in it for stale use only.
func (c *cache) load() error {
	b, err := os.ReadFile(c.file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var f cacheFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("read %s: %w", c.file, err)
	}
	if f.Version != cacheFileVersion {
		return fmt.Errorf("%s: version %d, want %d", c.file, f.Version, cacheFileVersion)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(f.Lists) - 1; i >= 0; i-- { // oldest first, so the file's order is kept
		if e := f.Lists[i]; e != nil && e.Key != "" && len(e.Candidates) > 0 {
			c.putLocked(e)
		}
	}
	return nil
}

// persist writes every list to the cache file: a temporary file in the
// same directory, synced, then renamed over it, so a reader (or a crash)
// sees the old file or the new one, never a part.
func (c *cache) persist() {
	if c.file == "" {
		return
	}
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	c.mu.Lock()
	f := cacheFile{Version: cacheFileVersion, WrittenAt: time.Now().UTC()}
	for el := c.ll.Front(); el != nil; el = el.Next() {
		e := *el.Value.(*entry)
		e.Candidates = slices.Clone(e.Candidates)
		f.Lists = append(f.Lists, &e)
	}
	c.mu.Unlock()
	if err := writeAtomically(c.file, f); err != nil {
		c.logger.Warn("agentreach client: cache file not written", "file", c.file, "err", err)
	}
}

func writeAtomically(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // after the rename, there is nothing to remove
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
