package jobs

import (
	"math/rand/v2"

	"github.com/agentreach/agentreach/domain"
)

// jitter is the service's source of backoff jitter, in [0, 1).
func (s *Service) jitter() float64 { return rand.Float64() }

// attemptPolicy is what the attempt decisions need of the configuration.
func (s *Service) attemptPolicy() domain.AttemptPolicy {
	return domain.AttemptPolicy{InputTimeout: s.cfg.InputTimeout}
}
