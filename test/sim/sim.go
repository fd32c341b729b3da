// Package sim is an in-process simulator of monky-tenancy's agent API and of the subset of
// OpenBao's HTTP API the agent uses (PROTOCOL.md §1–§3): check-in, bundle, lease and report on
// one handler; jwt login, token lookup/renew/revoke and KV-v2 reads on another; a JSON admin
// API for the monky-sim CLI on a third. It signs ES256 deploy grants with a key it generates,
// serves bundles built by tenancy's sha formula, enforces the 5-leases-per-hour budget and the
// env pinning of tokens, and injects faults on request.
//
// It is a test and demo double: it keeps everything in memory, never dials out, and may not
// be imported by the agent's own packages. It never logs a token, a grant or a secret value.
package sim

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/bundlecheck"
)

// Options configure a Sim. The zero value is usable.
type Options struct {
	Now                   func() time.Time // default time.Now; the lease window and token ttl use it
	KVMount               string           // default "monky"
	AuthMount             string           // default "jwt-tenancy"
	Role                  string           // default "see-env"
	TokenTTL, TokenMaxTTL time.Duration    // defaults 24h, 720h
	LeaseLimit            int              // per env per rolling hour, default 5
	// StaleAfter: the fleet view calls a box silent when it has not checked in or reported for
	// longer (the agents' stale_after_s; default 300 s). StuckAfter: a box that checks in but
	// has not applied its desired sha for longer needs a person (stuck_after_s; default 1800 s).
	StaleAfter, StuckAfter time.Duration
	Logf                   func(format string, args ...any)
}

// Counts are what the sim saw of one env.
//
// Checkins, BundleFetches, Reports and LeaseAsks count requests received (faulted and refused
// ones included); Leases counts leases granted, LeasesRefused lease requests answered 429;
// Logins, Renewals and Revocations (revoke-self of a live token) count successful ones; KVReads
// counts KV reads made with a valid token of the env, whatever the answer.
type Counts struct {
	Checkins      int `json:"checkins"`
	BundleFetches int `json:"bundle_fetches"`
	LeaseAsks     int `json:"lease_asks"`
	Leases        int `json:"leases"`
	LeasesRefused int `json:"leases_refused"`
	Logins        int `json:"logins"`
	Renewals      int `json:"renewals"`
	KVReads       int `json:"kv_reads"`
	Reports       int `json:"reports"`
	Revocations   int `json:"revocations"`
}

// FailRule makes both handlers answer requests whose path starts with Path with Status and a
// JSON error body carrying Code and Message (tenancy's {"detail":…} or OpenBao's {"errors":…}),
// plus Retry-After when set. Status 0 closes the connection without an answer. Times is how
// many requests the rule answers; 0 means until ClearFails.
type FailRule struct {
	Path       string `json:"path"`
	Status     int    `json:"status"`
	Code       string `json:"code,omitempty"`
	Message    string `json:"message,omitempty"`
	RetryAfter string `json:"retry_after,omitempty"`
	Times      int    `json:"times,omitempty"`
}

// Kit is what WriteKit needs to write an install kit.
type Kit struct {
	EnvID, Site, TenancyURL, BaoURL, StateDir, DeployDir, DockerBin string
	LogLevel                                                        string // default INFO
	IntervalS                                                       int    // written when > 0
}

type release struct {
	name    string
	sha     string
	files   map[string][]byte
	archive []byte
}

type secretVersion struct {
	data    map[string]string
	created time.Time
	deleted time.Time
}

type leaseAsk struct {
	at      time.Time
	granted bool
}

type env struct {
	id         string
	releases   map[string]*release // by name
	bySha      map[string]*release
	desired    string
	retired    bool
	purge      bool
	grants     map[string]bool // jti → superseded
	leases     []time.Time     // granted, inside or outside the window
	asks       []leaseAsk
	leaseShape string
	reports    []effects.Report
	lastAt     time.Time // when the last report came
	last       *effects.CheckinRequest
	lastSeenAt time.Time // when the box last checked in or reported
	desiredAt  time.Time // when the desired sha last changed
	counts     Counts
	secrets    map[string][]*secretVersion
}

type token struct {
	value    string
	accessor string
	envID    string
	jti      string
	role     string
	issued   time.Time
	expires  time.Time
	maxUntil time.Time
	revoked  bool
}

// Sim is the simulated tenancy + OpenBao. All methods are safe for concurrent use.
type Sim struct {
	opts   Options
	signer *signer

	mu          sync.Mutex
	envs        map[string]*env
	tokens      map[string]*token
	fails       []*FailRule
	baoAddr     string
	tenancyAddr string
	interval    int
	gzip        bool
	shaHeader   string
	external    *ExternalBao // tenancy checks bearers there when set
}

// New returns a Sim with a freshly generated ES256 signing key.
func New(opts Options) (*Sim, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.KVMount == "" {
		opts.KVMount = "monky"
	}
	if opts.AuthMount == "" {
		opts.AuthMount = "jwt-tenancy"
	}
	if opts.Role == "" {
		opts.Role = "see-env"
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = 24 * time.Hour
	}
	if opts.TokenMaxTTL == 0 {
		opts.TokenMaxTTL = 720 * time.Hour
	}
	if opts.LeaseLimit == 0 {
		opts.LeaseLimit = 5
	}
	if opts.StaleAfter == 0 {
		opts.StaleAfter = 300 * time.Second
	}
	if opts.StuckAfter == 0 {
		opts.StuckAfter = 1800 * time.Second
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	sg, err := newSigner()
	if err != nil {
		return nil, err
	}
	return &Sim{
		opts: opts, signer: sg,
		envs: map[string]*env{}, tokens: map[string]*token{},
		interval: 60, shaHeader: "X-Bundle-Sha",
	}, nil
}

func (s *Sim) now() time.Time { return s.opts.Now() }

// envLocked returns the env, creating it on first use.
func (s *Sim) envLocked(id string) *env {
	e := s.envs[id]
	if e == nil {
		e = &env{id: id, releases: map[string]*release{}, bySha: map[string]*release{},
			grants: map[string]bool{}, secrets: map[string][]*secretVersion{}}
		s.envs[id] = e
	}
	return e
}

// AddEnv makes envID known (every other call also creates the env on first use).
func (s *Sim) AddEnv(envID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.envLocked(envID)
}

// set stores v in the simulator's field f under its lock.
func set[T any](s *Sim, f *T, v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*f = v
}

// SetBaoAddr sets the OpenBao address the check-in's vault hint and the lease answer carry.
func (s *Sim) SetBaoAddr(addr string) { set(s, &s.baoAddr, addr) }

// SetTenancyAddr sets the tenancy base URL written into kits by the admin API.
func (s *Sim) SetTenancyAddr(addr string) { set(s, &s.tenancyAddr, addr) }

// SetCheckinInterval sets the checkin_interval_s every check-in answers (default 60).
func (s *Sim) SetCheckinInterval(seconds int) { set(s, &s.interval, seconds) }

// SetBundleGzip makes the bundle endpoint serve gzip-compressed archives.
func (s *Sim) SetBundleGzip(on bool) { set(s, &s.gzip, on) }

// SetBundleShaHeader names the header carrying the sha of a served bundle: "X-Bundle-Sha"
// (default), "X-Bundle-Sha256" as some tenancy builds send, or "" for none.
func (s *Sim) SetBundleShaHeader(name string) { set(s, &s.shaHeader, name) }

// AddRelease builds a bundle for envID from files (path → bytes, slash-separated relative
// paths). A bundle.json among them is taken as partial (agent flags, disk_need_bytes, …) and
// completed with env_id, files[] and compose_file (default compose.yaml). It returns the
// bundle's sha by tenancy's formula. A release of the same name is replaced. Publishing runs
// the publisher's check (internal/bundlecheck, what `monky-deployd check bundle` runs) and
// logs each finding as a warning: a release a box would refuse is still served.
func (s *Sim) AddRelease(envID, name string, files map[string][]byte) (string, error) {
	full, err := completeBundle(envID, files)
	if err != nil {
		return "", fmt.Errorf("release %s: %w", name, err)
	}
	sha, archive, err := buildArchive(full)
	if err != nil {
		return "", fmt.Errorf("release %s: %w", name, err)
	}
	s.addRelease(envID, &release{name: name, sha: sha, files: full, archive: archive})
	// the publisher's check (monky-deployd check bundle): a bundle a box would refuse is still
	// served — the refusal paths are what many a test drives — but never without a word
	for _, f := range bundlecheck.Run(archive, bundlecheck.Options{EnvID: envID}).Findings {
		s.opts.Logf("sim: release %s/%s: a box would refuse it: %s", envID, name, f)
	}
	return sha, nil
}

// AddRawRelease serves archive, as it is, under sha for envID: for tests of bundles the agent
// must refuse (a symlink entry, a sha that does not match the content, …).
func (s *Sim) AddRawRelease(envID, name, sha string, archive []byte) {
	s.addRelease(envID, &release{name: name, sha: sha, archive: append([]byte(nil), archive...)})
}

func (s *Sim) addRelease(envID string, r *release) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envLocked(envID)
	if old := e.releases[r.name]; old != nil && old.sha != r.sha {
		delete(e.bySha, old.sha)
	}
	e.releases[r.name] = r
	e.bySha[r.sha] = r
	s.opts.Logf("sim: release %s/%s sha=%s", envID, r.name, r.sha)
}

// Release returns the sha and archive of a release added under name.
func (s *Sim) Release(envID, name string) (sha string, archive []byte, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envLocked(envID)
	r := e.releases[name]
	if r == nil {
		return "", nil, false
	}
	return r.sha, append([]byte(nil), r.archive...), true
}

// Releases lists the env's release names, sorted.
func (s *Sim) Releases(envID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envLocked(envID)
	names := make([]string, 0, len(e.releases))
	for n := range e.releases {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SetDesired sets the env's desired sha ("" clears it). The sha must be a release of the env.
// Setting a sha also lifts a retire: the env is deployed again.
func (s *Sim) SetDesired(envID, sha string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envLocked(envID)
	if sha != "" && e.bySha[sha] == nil {
		return fmt.Errorf("set desired: %s has no release with sha %s", envID, sha)
	}
	if e.desired != sha {
		e.desired, e.desiredAt = sha, s.now()
	}
	if sha != "" {
		e.retired, e.purge = false, false
	}
	s.opts.Logf("sim: desired %s=%s", envID, sha)
	return nil
}

// SetDesiredRelease sets the desired sha to that of the release called name.
func (s *Sim) SetDesiredRelease(envID, name string) (string, error) {
	s.mu.Lock()
	r := s.envLocked(envID).releases[name]
	s.mu.Unlock()
	if r == nil {
		return "", fmt.Errorf("set desired: %s has no release %q", envID, name)
	}
	return r.sha, s.SetDesired(envID, r.sha)
}

// Desired returns the env's desired sha.
func (s *Sim) Desired(envID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.envLocked(envID).desired
}

// Retire makes every check-in of the env answer action down (purge_volumes = purge). Tenancy
// supersedes the env's grants on retire; the sim does so when it acknowledges the env's `down`
// report, so that the box can first learn of the retire and report it. From then on tokens
// minted from those grants get 401 AGENT_UNAUTHENTICATED.
func (s *Sim) Retire(envID string, purge bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envLocked(envID)
	e.retired, e.purge = true, purge
	s.opts.Logf("sim: retire %s purge=%t", envID, purge)
	return nil
}

// supersedeLocked marks every grant issued so far for e superseded.
func (s *Sim) supersedeLocked(e *env) {
	for jti := range e.grants {
		e.grants[jti] = true
	}
}

// RevealKit returns a fresh bootstrap grant for envID and supersedes every earlier grant
// (bootstrap or lease) of the env: tenancy refuses tokens minted from them with 401. The jwt
// mount keeps no replay state: a superseded grant still logs in until its exp.
func (s *Sim) RevealKit(envID string) (string, error) {
	s.mu.Lock()
	e := s.envLocked(envID)
	s.supersedeLocked(e)
	s.mu.Unlock()
	g, err := s.MintGrant(envID, time.Hour)
	if err != nil {
		return "", fmt.Errorf("reveal kit: %w", err)
	}
	s.opts.Logf("sim: kit revealed for %s", envID)
	return g, nil
}

// MintGrant signs a deploy grant for envID valid for ttl from Options.Now (negative: already
// expired) without superseding anything.
func (s *Sim) MintGrant(envID string, ttl time.Duration) (string, error) {
	return s.mintClaims(newGrantClaims(envID, s.now(), ttl))
}

// SignClaims signs arbitrary claims with the sim's key: for tests of grants with a wrong
// aud, kind or sub, which the jwt mount must refuse although the signature is good.
func (s *Sim) SignClaims(claims map[string]any) (string, error) {
	return s.signer.sign(claims)
}

func (s *Sim) mintClaims(c grantClaims) (string, error) {
	g, err := s.signer.sign(c)
	if err != nil {
		return "", fmt.Errorf("mint grant: %w", err)
	}
	s.mu.Lock()
	s.envLocked(c.EnvID).grants[c.JTI] = false
	s.mu.Unlock()
	return g, nil
}

// PutSecret writes a new KV-v2 version of <kv>/data/<env>/see/<name> and returns its number.
func (s *Sim) PutSecret(envID, name string, data map[string]string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envLocked(envID)
	cp := make(map[string]string, len(data))
	for k, v := range data {
		cp[k] = v
	}
	e.secrets[name] = append(e.secrets[name], &secretVersion{data: cp, created: s.now()})
	v := len(e.secrets[name])
	s.opts.Logf("sim: secret %s/see/%s version %d written", envID, name, v)
	return v
}

// DeleteSecretVersion soft-deletes one version (as `kv delete -versions=n`): reads of it
// answer 404 with data null and metadata.deletion_time set.
func (s *Sim) DeleteSecretVersion(envID, name string, version int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vs := s.envLocked(envID).secrets[name]
	if version >= 1 && version <= len(vs) && vs[version-1].deleted.IsZero() {
		vs[version-1].deleted = s.now()
	}
}

// RevokeTokens revokes every token minted for the env.
func (s *Sim) RevokeTokens(envID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tokens {
		if t.envID == envID {
			t.revoked = true
		}
	}
}

// Tokens returns how many live (unexpired, unrevoked) tokens the env has.
func (s *Sim) Tokens(envID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, now := 0, s.now()
	for _, t := range s.tokens {
		if t.envID == envID && !t.revoked && now.Before(t.expires) {
			n++
		}
	}
	return n
}

// Reports returns the reports tenancy acknowledged for the env, oldest first.
func (s *Sim) Reports(envID string) []effects.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]effects.Report(nil), s.envLocked(envID).reports...)
}

// LastCheckin returns the env's latest accepted check-in body.
func (s *Sim) LastCheckin(envID string) (effects.CheckinRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envLocked(envID)
	if e.last == nil {
		return effects.CheckinRequest{}, false
	}
	return *e.last, true
}

// Counts returns what the sim saw of the env.
func (s *Sim) Counts(envID string) Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.envLocked(envID).counts
}

// Fail adds a fault rule; rules are tried in the order added.
func (s *Sim) Fail(r FailRule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails = append(s.fails, &r)
}

// ClearFails removes every fault rule.
func (s *Sim) ClearFails() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails = nil
}

// SetLeaseShape sets how leases of the env are answered: "" the grant shape of record,
// "approle" the pre-2026-09-05 {wrapping_token, role_id} shape the agent must refuse.
func (s *Sim) SetLeaseShape(envID, shape string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.envLocked(envID).leaseShape = shape
}

// matchFail returns the rule answering p, counting it down, or nil.
func (s *Sim) matchFail(p string) *FailRule {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.fails {
		if !strings.HasPrefix(p, r.Path) {
			continue
		}
		out := *r
		if r.Times > 0 {
			r.Times--
			if r.Times == 0 {
				s.fails = append(s.fails[:i:i], s.fails[i+1:]...)
			}
		}
		return &out
	}
	return nil
}

// validPath reports whether p is a clean relative bundle path.
func validPath(p string) error {
	switch {
	case p == "" || strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is not relative", p)
	case path.Clean(p) != p || p == ".":
		return fmt.Errorf("path %q is not clean", p)
	case p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("path %q leaves the bundle", p)
	}
	return nil
}

// UnpublishRelease stops serving the bundle of the release called name while it stays
// desired: tenancy answers its fetch 404 BUNDLE_NOT_FOUND until AddRelease publishes it again.
func (s *Sim) UnpublishRelease(envID, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envLocked(envID)
	if r := e.releases[name]; r != nil {
		delete(e.bySha, r.sha)
		s.opts.Logf("sim: release %s/%s unpublished: its bundle answers 404", envID, name)
	}
}
