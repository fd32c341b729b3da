// Package redact masks secrets in every string the agent writes: logs, reports, the journal,
// status and explain output. Values are registered the moment they exist; token shapes
// (hvs., hvb., s., b., r., JWTs, Authorization: Bearer) are masked even when never registered.
package redact

// Mask is what a secret is replaced with.
const Mask = "[REDACTED]"
