// Package store keeps the agent's durable state: the machine's current state and counters,
// the transition journal, the lease budget, the report outbox and the applied-sha history.
//
// It never holds a secret: no token, grant or secret value is ever given to it, and it is the sink
// that makes sure: every word it keeps (a journal entry's code and detail, the record's failure,
// refusal, block and last report, a queued report's body) passes redact.Default on the way in,
// so a caller that forgets to mask leaks nothing. The bbolt
// implementation opens its file for each transaction and closes it straight after, so the
// file lock is never held across a network or docker call (status and explain never wait).
package store

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/tikali/monky-deployd/internal/vocab"
)

// SchemaVersion is the layout version kept at meta/version.
const SchemaVersion = 1

// Sentinel errors.
var (
	// ErrLocked: the file lock was not obtained within the timeout (another process holds it).
	ErrLocked = errors.New("state file is locked by another process")
	// ErrReadOnly: an Update on a store opened read-only (explain --state-file).
	ErrReadOnly = errors.New("state file is open read-only")
)

// Refusal is a bundle refused before the lease; remembered so it is not re-fetched each tick.
type Refusal struct {
	Sha    string     `json:"sha"`
	Code   vocab.Code `json:"code"`
	Detail string     `json:"detail"`
	At     time.Time  `json:"at"`
	// Reason is the typed cause behind Code ("" in a record written before reasons were kept).
	Reason vocab.Reason `json:"reason,omitempty"`
	// NeedBytes is what DISK_INSUFFICIENT measured against, so the next tick can re-measure
	// without fetching the bundle again (-1: the bundle declares no size).
	NeedBytes int64 `json:"need_bytes,omitempty"`
	// FreeBytes is the free space DISK_INSUFFICIENT measured (0: not measured, or an older file).
	FreeBytes int64 `json:"free_bytes,omitempty"`
}

// Block is what only a person or a new grant can clear.
type Block struct {
	Code   vocab.Code `json:"code"` // AGENT_ENV_MISMATCH | AGENT_UNAUTHENTICATED
	Detail string     `json:"detail"`
	// Reason is who decided the block: tenancy's 401, OpenBao's refusal, a local shape fault,
	// a grant unreadable or absent ("" in a record written before reasons were kept).
	Reason     vocab.Reason `json:"reason,omitempty"`
	At         time.Time    `json:"at"`
	ConfigHash string       `json:"config_hash"` // a changed config unblocks
	GrantStamp string       `json:"grant_stamp"` // size+mtime of bootstrap.jwt when blocked; a new grant unblocks
}

// Failure is the last failure after the lease, with what it cost.
type Failure struct {
	Sha    string     `json:"sha"`
	Code   vocab.Code `json:"code"`
	Detail string     `json:"detail"`
	State  string     `json:"state"` // the state whose step failed
	// Reason is the typed cause behind Code ("" in a record written before reasons were kept).
	Reason vocab.Reason `json:"reason,omitempty"`
	// Subject is what the failure is about that a fix line names: the secret's path as the
	// manifest entry gives it (<kv_mount>/data/…) for a secret OpenBao has no data, version or key
	// for; "" for other codes and in a record written before subjects were kept.
	Subject string    `json:"subject,omitempty"`
	At      time.Time `json:"at"`
	// Limit is the attempts the agent allowed when it committed this failure (it parks at Limit).
	Limit int `json:"limit,omitempty"`
	// RevertTo is the release last healthy on this box that a revert brings back for this failure
	// (the bundle's agent.revert_on_failure consented); "" when none was tried.
	RevertTo string `json:"revert_to,omitempty"`
	// Reverted says the revert to RevertTo passed the health gate: that release serves, and this
	// sha is not applied again until tenancy desires another or a person runs resume.
	Reverted bool `json:"reverted,omitempty"`
	// RevertFailed is why the revert to RevertTo failed too (the box stops reverting).
	RevertFailed string `json:"revert_failed,omitempty"`
	// NotServing is what the last tick of a parked revert found of RevertTo, the release it
	// brought back, when that release was not serving: the services, and why it was not healed
	// (held, heal off, heal_budget spent, or the heal did not bring it back); "" while it serves.
	NotServing string `json:"not_serving,omitempty"`
	// NotServingCode is NotServing's code: UNHEALTHY, or CRASH_LOOP past heal_budget.
	NotServingCode vocab.Code `json:"not_serving_code,omitempty"`
}

// Token sources: how the token was obtained (TokenMeta.Source).
const (
	SourceBootstrap = "bootstrap"
	SourceLease     = "lease"
)

// TokenMeta describes the bearer without its value (the value lives in bao.token, 0600).
type TokenMeta struct {
	Present   bool      `json:"present"`
	Source    string    `json:"source,omitempty"` // SourceBootstrap | SourceLease
	ExpiresAt time.Time `json:"expires_at,omitempty"`
	CheckedAt time.Time `json:"checked_at,omitempty"` // last lookup-self or renew
	GrantJTI  string    `json:"grant_jti,omitempty"`
	EnvID     string    `json:"env_id,omitempty"` // the env the token is pinned to
	// Untrusted is why the newest tick would not read the token file (files.TrustError: its
	// path and what is wrong — a symlink, not a regular file, a foreign owner, a loose mode);
	// "" when it read it or found none. Every surface that shows the token reads it: a token
	// the agent does not trust is never "present".
	Untrusted string `json:"untrusted,omitempty"`
}

// LastReport is the newest report handed to the outbox.
type LastReport struct {
	Result       string     `json:"result"`
	Sha          string     `json:"sha"`
	Code         vocab.Code `json:"code,omitempty"` // a failed report's code ("" in a record written before it was kept)
	Detail       string     `json:"detail,omitempty"`
	At           time.Time  `json:"at"`
	Acknowledged bool       `json:"acknowledged"`
}

// Container mirrors effects.Container (kept here so the store imports nothing of the agent).
type Container struct {
	Name     string `json:"name"`
	Service  string `json:"service"`
	State    string `json:"state"`
	Health   string `json:"health"`
	ExitCode int    `json:"-"` // effects.Container's: not kept
	Status   string `json:"-"`
	ID       string `json:"id,omitempty"` // the engine's container ID
}

// Record is the machine's current state and everything a tick needs to resume it.
type Record struct {
	EnvID      string `json:"env_id"`      // the env this state belongs to (for a support copy)
	State      string `json:"state"`       // a machine state name, validated by the machine on load
	Tick       uint64 `json:"tick"`        // the last tick number started
	Action     string `json:"action"`      // the action of the flight in progress (apply|none|down)
	Sha        string `json:"sha"`         // the desired sha of the flight in progress
	BundleURL  string `json:"bundle_url"`  // where that sha's bundle is served
	Purge      bool   `json:"purge"`       // the flight's purge_volumes
	AppliedSha string `json:"applied_sha"` // what runs now ("" before the first apply)
	DesiredSha string `json:"desired_sha"` // tenancy's desired sha at the last check-in

	Attempts    map[string]int `json:"attempts,omitempty"` // failed attempts, by the state whose step failed
	NextRetryAt time.Time      `json:"next_retry_at,omitempty"`
	Parked      bool           `json:"parked,omitempty"` // attempts exhausted: waits for resume or a new sha

	Refusal *Refusal `json:"refusal,omitempty"`
	Block   *Block   `json:"block,omitempty"`
	Failure *Failure `json:"failure,omitempty"`

	Token           TokenMeta   `json:"token"`
	LeaseJTI        string      `json:"lease_jti,omitempty"`         // the jti of the lease's grant kept for the login in flight
	LeaseRetryAfter time.Time   `json:"lease_retry_after,omitempty"` // a 429's Retry-After, honoured
	KVMount         string      `json:"kv_mount,omitempty"`          // adopted from the check-in's vault.mount
	IntervalS       int         `json:"interval_s,omitempty"`        // tenancy's checkin_interval_s
	LastCheckinAt   time.Time   `json:"last_checkin_at,omitempty"`
	LastReport      *LastReport `json:"last_report,omitempty"`
	Containers      []Container `json:"containers,omitempty"`
	// SeenAt is when Containers were listed: a container running then whose run is younger now
	// than the time since has restarted in between.
	SeenAt     time.Time `json:"seen_at,omitzero"`
	LastExit   int       `json:"last_exit"`
	RetiredAt  time.Time `json:"retired_at,omitempty"` // the last retire: applies before it are no rollback base
	LastTickAt time.Time `json:"last_tick_at,omitempty"`
	// Heals are when the heartbeat ran compose up of the applied release again, in the last
	// hour (heal_budget counts them; older ones are dropped when a heal is added).
	Heals []time.Time `json:"heals,omitempty"`
	// Temporary is the run of ticks in a row that ended exit 75, counted from its first tick
	// (zero once a tick ends otherwise): how long a temporary fault has lasted is read from it,
	// whatever the tick interval and however few tick headers are kept.
	Temporary TemporaryRun `json:"temporary,omitzero"`
	// Hold is a person's hold on the box (monky-deployd hold): while it lasts the tick checks in,
	// heartbeats and reports, and applies and heals wait. nil when none; a tick ends an expired one.
	Hold *Hold `json:"hold,omitempty"`
	// RevertOnFailure is the staged bundle's agent.revert_on_failure: its publisher consents
	// that a failed apply of it may bring back the release last healthy here.
	RevertOnFailure bool `json:"revert_on_failure,omitempty"`
	// Box is what decided the newest tick on this box (zero in a file an older agent wrote).
	Box Box `json:"box,omitzero"`
}

// Hold is a person's hold on the box: who put it, why, and until when.
type Hold struct {
	Reason string    `json:"reason"`
	By     string    `json:"by"`
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until"`
	// Waits is the desired sha whose apply the hold keeps waiting, once journaled ("" before).
	Waits string `json:"waits,omitempty"`
}

// Active reports whether the hold h lasts at now (a nil hold does not).
func (h *Hold) Active(now time.Time) bool { return h != nil && now.Before(h.Until) }

// TemporaryRun is a run of ticks in a row that ended exit 75.
type TemporaryRun struct {
	Since time.Time `json:"since"` // when the run's first tick started
	Ticks int       `json:"ticks"` // how many ticks it holds
}

// Box is what decided a tick on this box, written at every tick: its host, its paths and the
// config values a verdict depends on, so a copy of the file answers with this box's own words
// (its fix lines name its own paths and keys) without its config.
type Box struct {
	Host          string `json:"host,omitempty"`
	StateDir      string `json:"state_dir,omitempty"`
	DeployDir     string `json:"deploy_dir,omitempty"`
	Config        string `json:"config,omitempty"` // the config file the tick read
	BootstrapPath string `json:"bootstrap_path,omitempty"`
	BaoCAFile     string `json:"bao_ca_file,omitempty"`
	// BaoAddr is OpenBao's address the tick dialled (bao.addr): a fix line's look at OpenBao
	// names it, with BaoCAFile.
	BaoAddr string `json:"bao_addr,omitempty"`
	// BaoAuthMount and BaoRole are the auth mount and role the box logs in with (bao.auth_mount,
	// bao.role): a fix line that reads the role names them.
	BaoAuthMount string `json:"bao_auth_mount,omitempty"`
	BaoRole      string `json:"bao_role,omitempty"`
	// Project is the compose project (compose_project, else monky-<env_id>).
	Project           string  `json:"project,omitempty"`
	HealthyTimeoutS   int     `json:"healthy_timeout_s,omitempty"`
	DiskFactor        float64 `json:"disk_factor,omitempty"`
	DiskHeadroomBytes int64   `json:"disk_headroom_bytes,omitempty"`
	VolumesOnAbsent   string  `json:"volumes_on_absent,omitempty"`
	StuckAfterS       int     `json:"stuck_after_s,omitempty"`
	StaleAfterS       int     `json:"stale_after_s,omitempty"`
	// GrantOnDisk: a bootstrap grant lay at BootstrapPath when the tick ended.
	GrantOnDisk bool `json:"grant_on_disk,omitempty"`
	// User is the user the tick ran as: a fix line that changes the box runs as it (sudo -u).
	User string `json:"user,omitempty"`
	// Transport is how the tick dialled (system, proxy, sdk) and Identity the box's ziti
	// identity file: a mesh fault's fix names the tunneller only where one carries the dials.
	Transport string `json:"transport,omitempty"`
	Identity  string `json:"identity,omitempty"`
}

// TotalAttempts is the failed attempts of the flight, over every state.
func (r Record) TotalAttempts() int {
	n := 0
	for _, v := range r.Attempts {
		n += v
	}
	return n
}

// Entry is one journal line: a transition (From != To, or an fsm event) or a note (From == To).
type Entry struct {
	Seq   uint64     `json:"seq"` // assigned by Append
	Tick  uint64     `json:"tick"`
	At    time.Time  `json:"at"`
	From  string     `json:"from"`
	To    string     `json:"to"`
	Event string     `json:"event"`
	Ms    int64      `json:"ms"` // how long the step took
	Code  vocab.Code `json:"code,omitempty"`
	// Reason is the typed cause behind Code: who observed what ("" when the code says all, or
	// in an entry written before reasons were kept).
	Reason vocab.Reason `json:"reason,omitempty"`
	// Subject is what the entry is about that a fix line names: the file or directory whose
	// trust check ended the tick (a LOCAL_FAILURE); "" for any other, and in entries written
	// before it was kept.
	Subject string `json:"subject,omitempty"`
	Detail  string `json:"detail,omitempty"` // redacted words; names only, never a value
}

// TickSummary is one tick's header in the journal.
type TickSummary struct {
	Tick       uint64    `json:"tick"`
	StartedAt  time.Time `json:"started_at"`
	EndedAt    time.Time `json:"ended_at,omitempty"`
	Exit       *int      `json:"exit,omitempty"` // nil while the tick runs (or when it was killed)
	Action     string    `json:"action,omitempty"`
	DesiredSha string    `json:"desired_sha,omitempty"`
	AppliedSha string    `json:"applied_sha,omitempty"`
	// Folded counts later ticks that changed nothing and were folded into this one;
	// LastAt is when the newest of them ended.
	Folded uint64    `json:"folded,omitempty"`
	LastAt time.Time `json:"last_at,omitempty"`
}

// LeaseEvent is one lease asked of tenancy, granted or not (the 5-per-hour budget).
type LeaseEvent struct {
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"` // asked: every lease is recorded before it is asked
}

// QueuedReport is a report waiting in the outbox for tenancy's acknowledgement.
type QueuedReport struct {
	ID       uint64           `json:"id"`
	Queued   time.Time        `json:"queued"`
	Attempts int              `json:"attempts"`
	Body     json.RawMessage  `json:"body"` // the JSON report as it will be sent (redacted)
	Meta     QueuedReportMeta `json:"meta"`
}

// QueuedReportMeta lets the machine know what a queued report was for without decoding Body.
type QueuedReportMeta struct {
	Result string     `json:"result"`
	Sha    string     `json:"sha"`
	State  string     `json:"state"`          // the state that produced it
	Code   vocab.Code `json:"code,omitempty"` // a failed report's code ("" in an outbox written before it was kept)
}

// Applied is one entry of the applied-sha history (rollback detection).
type Applied struct {
	Sha string    `json:"sha"`
	At  time.Time `json:"at"`
}

// Retention bounds the journal.
type Retention struct {
	MaxTicks int           // keep at most this many tick summaries (with their entries)
	MaxAge   time.Duration // and none older than this, except the newest MaxTicks/10 non-heartbeat ticks
}

// DefaultRetention keeps a year of 60 s ticks small: heartbeats fold, so ticks here are mostly
// applies, refusals and failures.
var DefaultRetention = Retention{MaxTicks: 1000, MaxAge: 90 * 24 * time.Hour}

// Tx is one transaction. Everything written in an Update is committed together or not at all.
type Tx interface {
	Record() (Record, error) // a fresh Record{State: ""} on a new store
	PutRecord(Record) error

	// Append adds a journal entry, assigning and returning its sequence number.
	Append(e Entry) (uint64, error)
	// Entries returns the journal entries of one tick in order.
	Entries(tick uint64) ([]Entry, error)
	// AllEntries calls fn for every journal entry in order, stopping at the first error.
	AllEntries(fn func(Entry) error) error

	PutTick(TickSummary) error
	GetTick(tick uint64) (TickSummary, bool, error)
	// Ticks returns the newest n tick summaries (n <= 0: all), oldest first.
	Ticks(n int) ([]TickSummary, error)
	// DeleteTick removes a tick summary and all its journal entries.
	DeleteTick(tick uint64) error
	// Prune applies the retention policy as of now and returns how many ticks it removed.
	Prune(r Retention, now time.Time) (int, error)

	AddLease(LeaseEvent) error
	// Leases returns the lease events at or after since, oldest first; older ones may be dropped.
	Leases(since time.Time) ([]LeaseEvent, error)
	// RestampLeases stamps now every lease event stamped after now+skew (a clock that was
	// ahead and was stepped back) and returns how many it restamped: they count against the
	// budget for one window from now, not until the clock catches up with them.
	RestampLeases(now time.Time, skew time.Duration) (int, error)

	// Enqueue persists a report before it is sent and returns its id.
	Enqueue(q QueuedReport) (uint64, error)
	Outbox() ([]QueuedReport, error)
	UpdateQueued(q QueuedReport) error // bump Attempts
	Ack(id uint64) error

	AddApplied(Applied) error
	AppliedHistory() ([]Applied, error) // oldest first, bounded to the newest 100
}

// Store is the durable state. Update and View run one transaction each.
type Store interface {
	Update(fn func(Tx) error) error
	View(fn func(Tx) error) error
}
