package model

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// CheckInput is what the agent knows that the bundle is checked against.
type CheckInput struct {
	DesiredSha string // the check-in's desired_sha, validated (ValidSha)
	EnvID      string // the agent's env_id
	KVMount    string // the KV mount (the check-in's vault.mount, else the config's); "" means "monky"
	Compose    ComposeEnv
}

// ComposeEnv is what the compose file is interpolated with before the lease.
type ComposeEnv struct {
	// Project is the compose project name (`-p`); "" means "monky-<env>".
	Project string
	// AgentEnv lists the names (never the values) of the agent's environment that docker
	// will see; COMPOSE_* names are dropped (the agent strips them from docker's environment).
	AgentEnv []string
	// ScratchDir is where the private copy of the bundle is written for the loader and
	// removed afterwards; "" means the system's temporary directory.
	ScratchDir string
}

// DefaultKVMount is the KV mount when CheckInput names none.
const DefaultKVMount = "monky"

// Check decides the refusals that need nothing but the bundle and the agent's own facts, in
// PROTOCOL.md's order: BUNDLE_INVALID (a malformed manifest, a `.env.template` compose cannot
// read or that sets COMPOSE_*/DOCKER_*, a compose file over its bounds of cost, that compose-go
// cannot load within the budget or that holds more than one YAML document), BUNDLE_SHA_MISMATCH,
// BUNDLE_ENV_MISMATCH, ENV_INCOMPLETE, MANIFEST_PATH_REFUSED, PRIVILEGED_REFUSED (decided on the
// model compose-go loads, see compose.go). It returns nil when none applies; ROLLBACK_REFUSED and
// DISK_INSUFFICIENT come after it and are the caller's. The compose file is loaded in a bounded
// child (isolate.go), which writes a private scratch copy of the bundle for the loader and
// removes it before it answers.
func Check(b *bundle.Bundle, in CheckInput) *bundle.Refusal {
	err := CheckContext(context.Background(), b, in)
	var r *bundle.Refusal
	if err != nil && !errors.As(err, &r) {
		r = bundle.Invalid("%v", err)
	}
	return r
}

// CheckContext is Check cancelled with ctx: a *Refusal, nil, or — when ctx ends before the
// compose file is loaded — an error wrapping budget.ErrCancelled, which decides nothing.
func CheckContext(ctx context.Context, b *bundle.Bundle, in CheckInput) error {
	man, err := b.Manifest()
	if err != nil {
		return err
	}
	if _, err := bundle.ParseEnvTemplate(b.Files[bundle.TemplateFile]); err != nil {
		return err
	}
	findings, unlisted, err := loadBounded(ctx, b, in.Compose, in.EnvID)
	if err != nil {
		return err
	}
	if b.Sha != in.DesiredSha {
		return &bundle.Refusal{Code: vocab.BundleShaMismatch, Detail: fmt.Sprintf("content sha %s ≠ desired %s", short(b.Sha), short(in.DesiredSha))}
	}
	if b.Meta.EnvID != in.EnvID {
		return &bundle.Refusal{Code: vocab.BundleEnvMismatch, Detail: fmt.Sprintf("bundle is for %s, this agent is %s", bundle.QuoteName(b.Meta.EnvID), in.EnvID)}
	}
	if missing := Unresolved(b, man); len(missing) > 0 {
		return &bundle.Refusal{Code: vocab.EnvIncomplete, Detail: "unresolved: " + strings.Join(missing, ", ")}
	}
	mount := in.KVMount
	if mount == "" {
		mount = DefaultKVMount
	}
	for _, e := range man.Entries {
		if why := bundle.PathRefused(e.Path, mount, in.EnvID); why != "" {
			return &bundle.Refusal{Code: vocab.ManifestPathRefused, Detail: "entry " + e.Label() + ": " + why}
		}
	}
	if !b.Meta.Agent.AllowPrivileged && len(findings) > 0 {
		r := &bundle.Refusal{Code: vocab.PrivilegedRefused, Detail: strings.Join(findings, "; ") + " (bundle.json agent.allow_privileged is not set)"}
		if unlisted {
			r.Reason = vocab.ReasonUnlistedField
		}
		return r
	}
	return nil
}

// Unresolved returns the names `.env.template` references that no manifest entry supplies,
// sorted.
func Unresolved(b *bundle.Bundle, man bundle.Manifest) []string {
	have := man.Vars()
	var out []string
	for _, n := range bundle.References(b.Files[bundle.TemplateFile]) {
		if !have[n] {
			out = append(out, n)
		}
	}
	return out
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	if sha == "" {
		return `""`
	}
	return sha
}
