package domain

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultMaxPayloadBytes bounds a job's payload unless configured otherwise.
const DefaultMaxPayloadBytes = 1 << 20

// NormalizeSubmission fills the defaults of a submission and checks every
// field, returning the first problem as a *FieldError. JobID, RootJobID and
// ReplayOf are the caller's to set and are not checked here.
func NormalizeSubmission(s *Submitted, maxPayload int) error {
	if s.Namespace == "" {
		s.Namespace = DefaultNamespace
	}
	if !ValidNamespace(s.Namespace) {
		return fieldErr("namespace", "must be 1-63 lower-case letters, digits, '_' or '-'")
	}
	if err := checkCapability(s); err != nil {
		return err
	}
	if len(s.Hint) > 1024 {
		return fieldErr("hint", "must be at most 1024 characters")
	}
	p := bytes.TrimSpace(s.Payload)
	if len(p) == 0 || bytes.Equal(p, []byte("null")) {
		return fieldErr("payload", "is required (any JSON value but null)")
	}
	if !json.Valid(p) {
		return fieldErr("payload", "must be valid JSON")
	}
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayloadBytes
	}
	if len(p) > maxPayload {
		e := fieldErr("payload", "must be at most %d bytes, got %d", maxPayload, len(p))
		e.TooLarge = true
		return e
	}
	s.Payload = p
	switch s.Priority {
	case "":
		s.Priority = PriorityNormal
	case PriorityHigh, PriorityNormal, PriorityLow:
	default:
		return fieldErr("priority", "must be high, normal or low")
	}
	if s.TimeoutMS == 0 {
		s.TimeoutMS = int(DefaultTimeout / time.Millisecond)
	}
	if s.TimeoutMS < int(MinTimeout/time.Millisecond) || s.TimeoutMS > int(MaxTimeout/time.Millisecond) {
		return fieldErr("timeout_ms", "must be between %d and %d", MinTimeout/time.Millisecond, MaxTimeout/time.Millisecond)
	}
	if err := checkProtocolVersions(s.Constraints.ProtocolVersions); err != nil {
		return err
	}
	if s.RouteWaitMS < 0 || s.RouteWaitMS > int(MaxRouteWait/time.Millisecond) {
		return fieldErr("route_wait_ms", "must be between 1 and %d (0 or none: the service's default, 30 s unless configured)", MaxRouteWait/time.Millisecond)
	}
	if s.MaxAttempts == 0 {
		s.MaxAttempts = DefaultMaxAttempts
	}
	if s.MaxAttempts < 1 || s.MaxAttempts > MaxMaxAttempts {
		return fieldErr("max_attempts", "must be between 1 and %d", MaxMaxAttempts)
	}
	if s.BackoffBaseMS == 0 {
		s.BackoffBaseMS = int(DefaultBackoffBase / time.Millisecond)
	}
	if s.BackoffBaseMS < int(MinBackoffBase/time.Millisecond) || s.BackoffBaseMS > int(MaxBackoffMax/time.Millisecond) {
		return fieldErr("backoff_base_ms", "must be between %d and %d", MinBackoffBase/time.Millisecond, MaxBackoffMax/time.Millisecond)
	}
	if s.BackoffMaxMS == 0 {
		s.BackoffMaxMS = max(int(DefaultBackoffMax/time.Millisecond), s.BackoffBaseMS)
	}
	if s.BackoffMaxMS < s.BackoffBaseMS || s.BackoffMaxMS > int(MaxBackoffMax/time.Millisecond) {
		return fieldErr("backoff_max_ms", "must be between backoff_base_ms and %d", MaxBackoffMax/time.Millisecond)
	}
	if s.CallbackURL != "" {
		if err := ValidateHTTPURL("callback_url", s.CallbackURL); err != nil {
			return err
		}
	}
	if err := checkProtocols(s); err != nil {
		return err
	}
	if len(s.Constraints.Version) > 64 {
		return fieldErr("constraints.version", "must be at most 64 characters")
	}
	if len(s.IdempotencyKey) > 255 {
		return fieldErr("Idempotency-Key", "must be at most 255 characters")
	}
	if len(s.OrderingKey) > 255 || !utf8.ValidString(s.OrderingKey) || strings.ContainsRune(s.OrderingKey, 0) {
		return fieldErr("ordering_key", "must be at most 255 characters of UTF-8 text without NUL")
	}
	return nil
}

// checkCapability checks what the job is for: its capability, and the
// intent it was resolved from, if any.
func checkCapability(s *Submitted) error {
	if s.Capability == "" {
		return fieldErr("capability", "is required (or intent: the caller's words, resolved to a capability)")
	}
	if s.Intent != "" {
		if err := CheckIntent("intent", s.Intent); err != nil {
			return err
		}
	}
	if !ValidCapability(s.Capability) {
		return fieldErr("capability", "must be segments of letters, digits, '_' or '-' joined by '.', ':' or '/', e.g. document:parse:ocr")
	}
	return nil
}

// Timeout is the job's per-attempt deadline.
func (s *Submitted) Timeout() time.Duration { return time.Duration(s.TimeoutMS) * time.Millisecond }

// RouteWait is how long an attempt may wait for a routable agent: the
// job's route_wait_ms, or def when it names none.
func (s *Submitted) RouteWait(def time.Duration) time.Duration {
	if s.RouteWaitMS <= 0 {
		return def
	}
	return time.Duration(s.RouteWaitMS) * time.Millisecond
}

// BackoffBase is the wait before the first retry.
func (s *Submitted) BackoffBase() time.Duration {
	return time.Duration(s.BackoffBaseMS) * time.Millisecond
}

// BackoffMax caps the wait between retries.
func (s *Submitted) BackoffMax() time.Duration {
	return time.Duration(s.BackoffMaxMS) * time.Millisecond
}

// versionPatternRe is a protocol version a caller names, or a prefix of
// one ending in "*".
var versionPatternRe = regexp.MustCompile(`^[0-9A-Za-z.+-]*\*?$`)

// checkProtocolVersions checks the protocol versions a caller speaks.
func checkProtocolVersions(vs []string) error {
	if len(vs) > 16 {
		return fieldErr("constraints.protocol_versions", "must list at most 16 versions")
	}
	for _, v := range vs {
		if v == "" || len(v) > 32 || !versionPatternRe.MatchString(v) {
			return fieldErr("constraints.protocol_versions", "each must be 1-32 letters, digits, '.', '-' or '+', optionally ending in '*' (e.g. 1.0, 1.*)")
		}
	}
	return nil
}

// The faces a job may be submitted through besides REST (Submitted.Via).
const (
	ViaA2A = "a2a"
	ViaMCP = "mcp"
)

// checkProtocols checks the face a submit came through and the protocol
// it asks of its agent.
func checkProtocols(s *Submitted) error {
	switch s.Via {
	case "", ViaA2A, ViaMCP:
	default:
		return fieldErr("via", "must be a2a or mcp")
	}
	switch s.Constraints.Protocol {
	case "", ProtocolHTTP, ProtocolA2A, ProtocolMCP:
	default:
		return fieldErr("constraints.protocol", "must be http, a2a or mcp")
	}
	return nil
}
