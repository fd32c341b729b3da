// Package bundle reads a rendered bundle archive and decides what can be decided locally:
// whether the archive is safe to unpack (BUNDLE_INVALID), its sha by tenancy's formula, the
// variables `.env.template` references, the secrets manifest's paths, and the compose file's
// privileged findings. It is pure: it reads bytes it is given and writes nothing.
package bundle
