package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// CodeValidation is tenancy's code for a request it cannot validate (the agent has no row for
// it: it is tenancy's own). The sim answers its other refusals with the vocabulary's codes.
const CodeValidation = "VALIDATION_ERROR"

const bundlePrefix = "/v1/agent/bundle/"

// TenancyHandler serves tenancy's agent API: POST /v1/agent/checkin, GET
// /v1/agent/bundle/<env>/<sha>, POST /v1/agent/lease, POST /v1/agent/report and GET
// /.well-known/agent-jwks.json. Fault rules are applied before anything else.
func (s *Sim) TenancyHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agent/checkin", s.checkin)
	mux.HandleFunc("GET "+bundlePrefix+"{env}/{sha}", s.bundleFetch)
	mux.HandleFunc("POST /v1/agent/lease", s.lease)
	mux.HandleFunc("POST /v1/agent/report", s.report)
	mux.HandleFunc("GET /.well-known/agent-jwks.json", s.jwksHandler)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.countTenancy(r)
		if s.applyFail(w, r, false) {
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// countTenancy counts a request received for the env its body or path names.
func (s *Sim) countTenancy(r *http.Request) {
	var envID string
	p := r.URL.Path
	if strings.HasPrefix(p, bundlePrefix) {
		envID, _, _ = strings.Cut(strings.TrimPrefix(p, bundlePrefix), "/")
	} else {
		var b struct {
			EnvID string `json:"env_id"`
		}
		_ = json.Unmarshal(readBody(r), &b)
		envID = b.EnvID
	}
	if envID == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.envLocked(envID).counts
	switch {
	case p == "/v1/agent/checkin":
		c.Checkins++
	case p == "/v1/agent/lease":
		c.LeaseAsks++
	case p == "/v1/agent/report":
		c.Reports++
	case strings.HasPrefix(p, bundlePrefix):
		c.BundleFetches++
	}
}

// authTenancy checks the bearer as tenancy does (auth/token/lookup at OpenBao, then the
// grant's supersession) and pins it to envID. It writes the error and returns nil on refusal.
func (s *Sim) authTenancy(w http.ResponseWriter, r *http.Request, envID string) *token {
	v := bearer(r)
	s.mu.Lock()
	if ext := s.external; ext != nil {
		s.mu.Unlock()
		return s.authExternal(w, r, ext, envID)
	}
	t := s.liveTokenLocked(v)
	var superseded bool
	if t != nil {
		superseded = s.envLocked(t.envID).grants[t.jti]
	}
	s.mu.Unlock()
	switch {
	case t == nil:
		tenancyError(w, http.StatusUnauthorized, vocab.AgentUnauthenticated, "bearer refused: token unknown, expired or revoked")
		return nil
	case superseded:
		tenancyError(w, http.StatusUnauthorized, vocab.AgentUnauthenticated, "bearer refused: its deploy grant was superseded")
		return nil
	case t.envID != envID:
		tenancyError(w, http.StatusForbidden, vocab.AgentEnvMismatch,
			fmt.Sprintf("token is pinned to %s, not %s", t.envID, envID))
		return nil
	}
	return t
}

func decodeStrict(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.Unmarshal(readBody(r), v); err != nil {
		tenancyError(w, http.StatusUnprocessableEntity, CodeValidation, "body is not the expected JSON: "+err.Error())
		return false
	}
	return true
}

// decodeForEnv decodes the body into v, whose env_id field is *envID, and checks that the
// bearer may act for that env. When not, it has answered with the error and reports false.
func (s *Sim) decodeForEnv(w http.ResponseWriter, r *http.Request, v any, envID *string) bool {
	if !decodeStrict(w, r, v) {
		return false
	}
	if *envID == "" {
		tenancyError(w, http.StatusUnprocessableEntity, CodeValidation, "env_id is required")
		return false
	}
	return s.authTenancy(w, r, *envID) != nil
}

func (s *Sim) checkin(w http.ResponseWriter, r *http.Request) {
	var req effects.CheckinRequest
	if !s.decodeForEnv(w, r, &req, &req.EnvID) {
		return
	}
	s.mu.Lock()
	e := s.envLocked(req.EnvID)
	cp := req
	e.last = &cp
	e.lastSeenAt = s.now()
	resp := effects.CheckinResponse{
		EnvID: e.id, DesiredSha: e.desired, Action: vocab.ActionNone,
		CheckinIntervalS: s.interval,
		Vault: &effects.VaultHint{Addr: s.baoAddr, Mount: s.opts.KVMount, Prefix: e.id + "/see",
			AuthMount: s.opts.AuthMount, AuthRole: s.opts.Role},
	}
	switch {
	case e.retired:
		resp.Action, resp.PurgeVolumes = vocab.ActionDown, e.purge
	case e.desired != "" && e.desired != req.AppliedSha:
		resp.Action = vocab.ActionApply
	}
	if e.desired != "" {
		resp.BundleURL = bundlePrefix + e.id + "/" + e.desired
	}
	s.mu.Unlock()
	s.opts.Logf("sim: checkin %s applied=%s -> action=%s desired=%s", req.EnvID, short(req.AppliedSha), resp.Action, short(resp.DesiredSha))
	writeJSON(w, http.StatusOK, resp)
}

func (s *Sim) bundleFetch(w http.ResponseWriter, r *http.Request) {
	envID, sha := r.PathValue("env"), r.PathValue("sha")
	if s.authTenancy(w, r, envID) == nil {
		return
	}
	s.mu.Lock()
	rel := s.envLocked(envID).bySha[sha]
	gz, hdr := s.gzip, s.shaHeader
	s.mu.Unlock()
	if rel == nil {
		tenancyError(w, http.StatusNotFound, vocab.BundleNotFound, fmt.Sprintf("no bundle %s for %s", sha, envID))
		return
	}
	body, ctype := rel.archive, "application/x-tar"
	if gz {
		var err error
		if body, err = gzipBytes(body); err != nil {
			tenancyError(w, http.StatusInternalServerError, "INTERNAL", err.Error())
			return
		}
		ctype = "application/gzip"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if hdr != "" {
		w.Header().Set(hdr, rel.sha)
	}
	s.opts.Logf("sim: bundle %s/%s served (%d bytes)", envID, short(sha), len(body))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func (s *Sim) lease(w http.ResponseWriter, r *http.Request) {
	var req struct {
		EnvID  string `json:"env_id"`
		Reason string `json:"reason"`
	}
	if !s.decodeForEnv(w, r, &req, &req.EnvID) {
		return
	}
	now := s.now()
	s.mu.Lock()
	e := s.envLocked(req.EnvID)
	// Drop the leases that left the rolling hour.
	keep := e.leases[:0]
	for _, t := range e.leases {
		if now.Sub(t) < time.Hour {
			keep = append(keep, t)
		}
	}
	e.leases = keep
	if len(e.leases) >= s.opts.LeaseLimit {
		wait := e.leases[0].Add(time.Hour).Sub(now)
		secs := int(math.Ceil(wait.Seconds()))
		if secs < 1 {
			secs = 1
		}
		e.counts.LeasesRefused++
		e.asks = append(e.asks, leaseAsk{at: now})
		s.mu.Unlock()
		s.opts.Logf("sim: lease %s refused: %d in the last hour, retry after %ds", req.EnvID, s.opts.LeaseLimit, secs)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		tenancyError(w, http.StatusTooManyRequests, vocab.LeaseRateLimited,
			fmt.Sprintf("%d leases per environment per hour", s.opts.LeaseLimit))
		return
	}
	e.leases = append(e.leases, now)
	e.asks = append(e.asks, leaseAsk{at: now, granted: true})
	e.counts.Leases++
	shape, addr := e.leaseShape, s.baoAddr
	s.mu.Unlock()

	if shape == "approle" {
		s.opts.Logf("sim: lease %s granted in the approle shape", req.EnvID)
		writeJSON(w, http.StatusOK, map[string]any{
			"env_id": req.EnvID, "wrapping_token": "s." + randomBase62(24), "role_id": randomHex(16),
		})
		return
	}
	grant, err := s.MintGrant(req.EnvID, time.Hour)
	if err != nil {
		tenancyError(w, http.StatusInternalServerError, "INTERNAL", "cannot sign the grant")
		return
	}
	s.opts.Logf("sim: lease %s granted (reason %q)", req.EnvID, req.Reason)
	writeJSON(w, http.StatusOK, effects.Lease{
		EnvID: req.EnvID, LoginJWT: grant, TTLS: 3600,
		Mount: s.opts.AuthMount, Role: s.opts.Role, Addr: addr,
	})
}

func (s *Sim) report(w http.ResponseWriter, r *http.Request) {
	var rep effects.Report
	if !decodeStrict(w, r, &rep) {
		return
	}
	switch rep.Result {
	case effects.ResultApplied, effects.ResultFailed, effects.ResultDown:
	default:
		tenancyError(w, http.StatusUnprocessableEntity, CodeValidation,
			fmt.Sprintf("result must be applied, failed or down, not %q", rep.Result))
		return
	}
	if s.authTenancy(w, r, rep.EnvID) == nil {
		return
	}
	s.mu.Lock()
	e := s.envLocked(rep.EnvID)
	e.reports = append(e.reports, rep)
	e.lastAt = s.now()
	e.lastSeenAt = e.lastAt
	if rep.Result == effects.ResultDown && e.retired {
		// The box is down: tenancy's retire now cuts it off.
		s.supersedeLocked(e)
	}
	s.mu.Unlock()
	s.opts.Logf("sim: report %s sha=%s result=%s", rep.EnvID, short(rep.Sha), rep.Result)
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

func (s *Sim) jwksHandler(w http.ResponseWriter, _ *http.Request) {
	set, err := s.signer.jwks()
	if err != nil {
		tenancyError(w, http.StatusInternalServerError, "INTERNAL", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, set)
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
