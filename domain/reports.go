package domain

import "encoding/json"

// SubmitResult is the answer to a submit.
type SubmitResult struct {
	JobID   string
	TraceID string
	Status  JobStatus
	// Existing is true when an earlier submit with the same
	// Idempotency-Key created the job.
	Existing bool
}

// ResultReport is an agent's report of an attempt's outcome.
type ResultReport struct {
	Status  JobStatus
	Result  json.RawMessage
	BizCode string
	// Attempt is the attempt reported on; 0 means the job's latest.
	Attempt int
	// ClaimNext asks a pull agent's next deliveries, up to this many (0
	// to MaxClaimNext), claimed in the report's own transaction: the slot
	// it gives back goes straight to the agent's next job.
	ClaimNext int
}

// HeldAttempt names one attempt a pull agent holds.
type HeldAttempt struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
}
