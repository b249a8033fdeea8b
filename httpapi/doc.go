// Package httpapi serves Agent-Reach's public HTTP contract (docs/api.md) with
// gin. Handlers speak their own request and response types, end with
// c.Error(err) on failure, and one middleware turns errors into statuses
// and the stable error body.
package httpapi
