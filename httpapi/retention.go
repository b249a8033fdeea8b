package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/domain"
)

// retentionRequest is a PUT of a namespace's retention: its own period in
// seconds, never more than the deployment's (0: the deployment's).
type retentionRequest struct {
	Namespace        string `json:"namespace"`
	RetentionSeconds *int64 `json:"retention_seconds"`
}

// retentionResponse is a namespace's retention: the period in force, its
// own (0: none), the deployment's, how wide a partition of the log is
// (how late past its period a job's history may go) and where partitions
// are archived before they are dropped ("": nowhere).
type retentionResponse struct {
	Namespace                  string `json:"namespace"`
	RetentionSeconds           int64  `json:"retention_seconds"`
	OwnRetentionSeconds        int64  `json:"own_retention_seconds"`
	DeploymentRetentionSeconds int64  `json:"deployment_retention_seconds"`
	PartitionSeconds           int64  `json:"partition_seconds"`
	ArchiveTo                  string `json:"archive_to"`
	Version                    int    `json:"version"`
}

func retentionOf(p domain.RetentionPolicy) retentionResponse {
	return retentionResponse{Namespace: p.Namespace, RetentionSeconds: int64(p.Period() / time.Second),
		OwnRetentionSeconds: int64(p.Own / time.Second), DeploymentRetentionSeconds: int64(p.Deployment / time.Second),
		PartitionSeconds: int64(p.PartitionWidth / time.Second), ArchiveTo: p.ArchiveTo, Version: p.Version}
}

func (s *Server) getRetention(c *gin.Context) {
	ns, err := readNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	p, err := s.deps.Retention.PolicyOf(c.Request.Context(), ns)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, retentionOf(p))
}

func (s *Server) setRetention(c *gin.Context) {
	var req retentionRequest
	if err := bindJSON(c, &req, true); err != nil {
		_ = c.Error(err)
		return
	}
	p := principal(c)
	ns, err := policyNamespace(c, req.Namespace, "name the namespace whose retention this is; the deployment's is set with serve --retention")
	if err != nil {
		_ = c.Error(err)
		return
	}
	if req.RetentionSeconds == nil {
		_ = c.Error(Invalid("retention_seconds", "required: the namespace's period in seconds, or 0 for the deployment's"))
		return
	}
	if *req.RetentionSeconds < 0 || *req.RetentionSeconds > int64(100*365*24*time.Hour/time.Second) {
		_ = c.Error(Invalid("retention_seconds", "must be 0 (the deployment's period) or from 60 up to the deployment's period"))
		return
	}
	out, err := s.deps.Retention.SetPolicy(c.Request.Context(), ns, time.Duration(*req.RetentionSeconds)*time.Second, s.meta(c, p.Actor()))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, retentionOf(out))
}
