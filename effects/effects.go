// Package effects holds the interfaces through which the agent touches the world outside
// its process: tenancy, OpenBao, the docker CLI, the disk. The machine and its state handlers
// see only these interfaces; the implementations live in the sub-packages and classify their
// own errors (see Error). Nothing here decides what the agent does next.
package effects

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// Container is one row of `compose ps`, as sent to tenancy in check-ins and reports.
type Container struct {
	Name    string `json:"name"`
	Service string `json:"service"`
	State   string `json:"state"`
	Health  string `json:"health"`
	// ExitCode and Status are what the engine says of the container beyond the wire's four
	// fields: how an exited one ended, and compose's words for how long it has run ("Up 2
	// minutes (healthy)"). The health gate reads them; they are not sent.
	ExitCode int    `json:"-"`
	Status   string `json:"-"`
	// ID is the engine's container ID: the same container restarted keeps it, a new one does not.
	ID string `json:"-"`
}

// Healthy reports whether a container is running and healthy (or has no healthcheck).
func (c Container) Healthy() bool {
	return c.State == "running" && (c.Health == "" || c.Health == "healthy")
}

// CheckinRequest is the body of POST /v1/agent/checkin.
type CheckinRequest struct {
	EnvID        string      `json:"env_id"`
	AgentVersion string      `json:"agent_version"`
	AppliedSha   string      `json:"applied_sha"`
	Host         string      `json:"host"`
	Containers   []Container `json:"containers"`
	// Why is a held box's hold (code HELD, the reason, who and until when); absent otherwise.
	Why *ReportWhy `json:"why,omitempty"`
}

// VaultHint is the check-in's optional `vault` object.
type VaultHint struct {
	Addr      string `json:"addr,omitempty"`
	Mount     string `json:"mount,omitempty"`
	Prefix    string `json:"prefix,omitempty"`
	AuthMount string `json:"auth_mount,omitempty"`
	AuthRole  string `json:"auth_role,omitempty"`
}

// CheckinResponse is tenancy's answer to a check-in.
type CheckinResponse struct {
	EnvID            string     `json:"env_id"`
	DesiredSha       string     `json:"desired_sha"`
	Action           string     `json:"action"`
	PurgeVolumes     bool       `json:"purge_volumes"`
	BundleURL        string     `json:"bundle_url"`
	CheckinIntervalS int        `json:"checkin_interval_s"`
	Vault            *VaultHint `json:"vault,omitempty"`
}

// Bundle is what a download of a bundle archive said of it; the archive itself went to the
// writer FetchBundle was given, not yet verified.
type Bundle struct {
	Size      int64  // the archive's bytes as served (tar or gzip)
	HeaderSha string // X-Bundle-Sha or X-Bundle-Sha256, "" when absent
}

// Lease is tenancy's AgentLeaseOut. LoginJWT is a secret: register it with the redactor.
type Lease struct {
	EnvID    string `json:"env_id"`
	LoginJWT string `json:"login_jwt"`
	TTLS     int    `json:"ttl_s"`
	Mount    string `json:"mount"`
	Role     string `json:"role"`
	Addr     string `json:"addr"`
}

// Report results. Nothing else exists.
const (
	ResultApplied = "applied"
	ResultFailed  = "failed"
	ResultDown    = "down"
)

// Report is the body of POST /v1/agent/report. Detail and LogTail carry names, never values.
type Report struct {
	EnvID        string `json:"env_id"`
	Sha          string `json:"sha"`
	Result       string `json:"result"`
	AgentVersion string `json:"agent_version"`
	Detail       string `json:"detail,omitempty"`
	// Code is the code Detail begins with, for the agent's own record; not sent (the wire
	// carries it in Detail and Why).
	Code       vocab.Code  `json:"-"`
	LogTail    string      `json:"log_tail,omitempty"`
	Containers []Container `json:"containers"`
	// Why is the box's verdict in explain's words, on every failed report (PROTOCOL.md §1).
	Why *ReportWhy `json:"why,omitempty"`
	// RevertedTo is the release this tick brought back after Sha failed (a failed report only).
	RevertedTo string `json:"reverted_to,omitempty"`
}

// ReportWhy is a failed report's why: strings only, redacted like Detail.
type ReportWhy struct {
	Code     string `json:"code"`
	Reason   string `json:"reason,omitempty"` // the typed cause behind Code (docs/JOURNAL.md, "Reasons")
	Verdict  string `json:"verdict"`          // VerdictWorking | VerdictNeedsPerson
	Since    string `json:"since"`            // RFC 3339, UTC
	Fault    string `json:"fault"`
	Evidence string `json:"evidence"`
	Next     string `json:"next"`
	Fix      string `json:"fix"`
}

// The verdicts a report's why carries.
const (
	VerdictWorking     = "working"
	VerdictNeedsPerson = "needs_person"
)

// MaxReportBytes bounds a report's JSON body (PROTOCOL.md §1).
const MaxReportBytes = 8 << 10

// Tenancy is the agent API of monky-tenancy. token is the agent's OpenBao token (the bearer).
// Every method returns an *Error for a protocol or transport failure.
type Tenancy interface {
	Checkin(ctx context.Context, token string, req CheckinRequest) (CheckinResponse, error)
	// FetchBundle GETs url (a path such as /v1/agent/bundle/<env>/<sha>, or absolute) and
	// copies the body into dst up to limit bytes (more is an error of kind Permanent with code
	// BUNDLE_INVALID); on any error dst holds a partial answer the caller discards.
	FetchBundle(ctx context.Context, token, url string, limit int64, dst io.Writer) (Bundle, error)
	Lease(ctx context.Context, token, envID, reason string) (Lease, error)
	Report(ctx context.Context, token string, r Report) error
}

// Token is an OpenBao token as a login answered it. Value is a secret.
type Token struct {
	Value     string
	TTL       time.Duration
	Renewable bool
	Meta      map[string]string // env_id, grant_jti, role
}

// TokenInfo is lookup-self's answer (no secret in it).
type TokenInfo struct {
	TTL         time.Duration
	ExpireTime  time.Time // zero when the token does not expire
	IssueTime   time.Time
	ExplicitMax time.Duration
	EnvID       string
	GrantJTI    string
}

// Bao is OpenBao's HTTP API, as much of it as the agent uses. KV values are secrets.
type Bao interface {
	Login(ctx context.Context, mount, role, jwt string) (Token, error)
	LookupSelf(ctx context.Context, token string) (TokenInfo, error)
	RenewSelf(ctx context.Context, token string, increment time.Duration) (time.Duration, error)
	RevokeSelf(ctx context.Context, token string) error
	// ReadKV reads key from the KV-v2 path `<mount>/data/<rest>` (path as in the manifest,
	// mount included) at version (0: latest). A deleted or destroyed version is an error.
	ReadKV(ctx context.Context, token, path, key string, version int) (string, error)
}

// Compose runs `docker compose -p <project>` in a directory (the release, `current`), and
// prepares what it runs: the release verified, its model loaded and resolved as compose would
// run it, the registry credential it pulls with.
type Compose interface {
	PS(ctx context.Context, dir string) ([]Container, error)
	Pull(ctx context.Context, dir string) error // the error carries the registry's own message
	Up(ctx context.Context, dir string) error
	Down(ctx context.Context, dir string, volumes bool) error
	Logs(ctx context.Context, dir string, tail int) (string, error)
	// DataRoot is `docker info -f '{{.DockerRootDir}}'`.
	DataRoot(ctx context.Context) (string, error)
	ImagePrune(ctx context.Context) error

	// VerifyRelease checks that the release written at rel is still the one that was verified
	// (op names the step in the error).
	VerifyRelease(op, rel string) error
	// Resolve is the model compose runs, as `docker compose config` prints it.
	Resolve(p *types.Project) ([]byte, error)
	// WriteDockerConfig writes the registry credential as docker's config.json in dir.
	WriteDockerConfig(fsys files.FS, dir string, a RegistryAuth) error
}

// RegistryAuth is the registry pull credential. Password is a secret: String never shows it.
type RegistryAuth struct {
	Registry string
	Username string
	Password string
}

// String names the credential without its secret.
func (a RegistryAuth) String() string {
	return fmt.Sprintf("registry credential for %s (user %s)", a.Registry, a.Username)
}

// GoString keeps %#v from printing the password.
func (a RegistryAuth) GoString() string { return a.String() }

// ComposeReady is a Compose that can say, before an apply spends a lease, whether compose can
// run on this box at all (docker.CLI: the docker CLI, compose v2, docker's socket). Ready runs
// no engine call; its error is permanent and carries the code and the fix.
type ComposeReady interface {
	Ready(ctx context.Context) error
}

// Disk measures free space.
type Disk interface {
	// Free is the bytes available to an unprivileged writer on the filesystem holding path
	// (the nearest existing ancestor when path does not exist).
	Free(path string) (uint64, error)
}
