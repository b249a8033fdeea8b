// Package netguard is Agent-Reach's guard against server-side request
// forgery (SSRF).
//
// Agent-Reach makes outbound HTTP calls to URLs that users supply (agent
// endpoints, health URLs, caller callback URLs). Without a guard, anyone who
// can register such a URL can make the service reach addresses it can see
// but the user cannot, most importantly the cloud instance metadata service
// at 169.254.169.254, which hands out credentials.
//
// The guard works in two places because either alone is insufficient:
//
//   - [Policy.CheckURL] runs when a URL is registered or submitted, so bad
//     URLs are rejected early with a useful message instead of failing
//     later inside a background job.
//   - [Policy.Control] / [Policy.DialContext] run on every connection
//     attempt, on the address actually being connected to. A name can
//     resolve to a harmless address at registration time and to
//     169.254.169.254 a minute later (DNS rebinding); only the connect-time
//     check sees the address that is really used. It also covers redirects,
//     since every hop is a new dial.
//
// Private (RFC 1918, fc00::/7) and loopback networks are allowed by default
// because internal agents legitimately live there; operators who want them
// blocked add them to the deny list with [ParsePolicy].
package netguard
