package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
)

// Admin API request bodies (JSON), as the monky-sim CLI sends them.
type (
	// DesireRequest sets the desired sha by release name (or by sha).
	DesireRequest struct {
		Env     string `json:"env"`
		Release string `json:"release,omitempty"`
		Sha     string `json:"sha,omitempty"`
	}
	// RetireRequest retires an env.
	RetireRequest struct {
		Env   string `json:"env"`
		Purge bool   `json:"purge"`
	}
	// RevealRequest reveals a kit and writes it into Kit, a directory on the sim's host.
	RevealRequest struct {
		Env       string `json:"env"`
		Kit       string `json:"kit"`
		Site      string `json:"site,omitempty"`
		StateDir  string `json:"state_dir,omitempty"` // default <kit>/state
		DeployDir string `json:"deploy_dir,omitempty"`
		DockerBin string `json:"docker_bin,omitempty"`
		LogLevel  string `json:"log_level,omitempty"`
		IntervalS int    `json:"interval_s,omitempty"`
	}
	// SecretRequest writes a new KV version of <env>/see/<name>.
	SecretRequest struct {
		Env  string            `json:"env"`
		Name string            `json:"name"`
		Data map[string]string `json:"data"`
	}
	// EnvRequest names an env (revoke).
	EnvRequest struct {
		Env string `json:"env"`
	}
	// IntervalRequest sets the checkin_interval_s every check-in answers from now on.
	IntervalRequest struct {
		IntervalS int `json:"interval_s"`
	}
)

// ReleaseInfo is one row of GET /admin/releases.
type ReleaseInfo struct {
	Name    string `json:"name"`
	Sha     string `json:"sha"`
	Desired bool   `json:"desired"`
}

// AdminHandler serves the JSON admin API:
//
//	POST /admin/desire      DesireRequest → {"env","release","sha"}
//	POST /admin/retire      RetireRequest
//	POST /admin/reveal      RevealRequest → {"env","kit","config","bootstrap"} (paths, never the grant)
//	POST /admin/secret      SecretRequest → {"env","name","version"} (never the value)
//	POST /admin/revoke      EnvRequest: revoke every token of the env
//	POST /admin/fail        FailRule;  POST /admin/clear-fails
//	POST /admin/interval    IntervalRequest: the checkin_interval_s of every answer from now on
//	GET  /admin/reports?env=E   []effects.Report
//	GET  /admin/counts?env=E    Counts
//	GET  /admin/releases?env=E  []ReleaseInfo
//	GET  /admin/fleet[?all=1]   []FleetRow: each env's last report and why, grouped by code
//	                            (only the envs with a code, unless all)
//
// Errors are {"error": "…"} with 400 or 404.
func (s *Sim) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /admin/desire", func(w http.ResponseWriter, r *http.Request) {
		var req DesireRequest
		if !adminDecode(w, r, &req) {
			return
		}
		sha, err := req.Sha, error(nil)
		if req.Release != "" {
			sha, err = s.SetDesiredRelease(req.Env, req.Release)
		} else {
			err = s.SetDesired(req.Env, req.Sha)
		}
		if err != nil {
			adminError(w, http.StatusNotFound, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"env": req.Env, "release": req.Release, "sha": sha})
	})
	mux.HandleFunc("POST /admin/retire", func(w http.ResponseWriter, r *http.Request) {
		var req RetireRequest
		if !adminDecode(w, r, &req) {
			return
		}
		if err := s.Retire(req.Env, req.Purge); err != nil {
			adminError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"env": req.Env, "retired": true, "purge": req.Purge})
	})
	mux.HandleFunc("POST /admin/reveal", func(w http.ResponseWriter, r *http.Request) {
		var req RevealRequest
		if !adminDecode(w, r, &req) {
			return
		}
		if req.Kit == "" {
			adminError(w, http.StatusBadRequest, fmt.Errorf("kit directory is required"))
			return
		}
		s.mu.Lock()
		tenancyURL, baoURL := s.tenancyAddr, s.baoAddr
		s.mu.Unlock()
		k := Kit{EnvID: req.Env, Site: req.Site, TenancyURL: tenancyURL, BaoURL: baoURL,
			StateDir: req.StateDir, DeployDir: req.DeployDir, DockerBin: req.DockerBin,
			LogLevel: req.LogLevel, IntervalS: req.IntervalS}
		if err := s.WriteKit(req.Kit, k); err != nil {
			adminError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"env": req.Env, "kit": req.Kit,
			"config": filepath.Join(req.Kit, "config.yaml"), "bootstrap": filepath.Join(req.Kit, "bootstrap.jwt")})
	})
	mux.HandleFunc("POST /admin/secret", func(w http.ResponseWriter, r *http.Request) {
		var req SecretRequest
		if !adminDecode(w, r, &req) {
			return
		}
		if req.Name == "" || len(req.Data) == 0 {
			adminError(w, http.StatusBadRequest, fmt.Errorf("name and data are required"))
			return
		}
		v := s.PutSecret(req.Env, req.Name, req.Data)
		writeJSON(w, http.StatusOK, map[string]any{"env": req.Env, "name": req.Name, "version": v})
	})
	mux.HandleFunc("POST /admin/revoke", func(w http.ResponseWriter, r *http.Request) {
		var req EnvRequest
		if !adminDecode(w, r, &req) {
			return
		}
		s.RevokeTokens(req.Env)
		writeJSON(w, http.StatusOK, map[string]any{"env": req.Env, "revoked": true})
	})
	mux.HandleFunc("POST /admin/fail", func(w http.ResponseWriter, r *http.Request) {
		var req FailRule
		if err := json.Unmarshal(readBody(r), &req); err != nil || req.Path == "" {
			adminError(w, http.StatusBadRequest, fmt.Errorf("a fail rule needs at least a path"))
			return
		}
		s.Fail(req)
		writeJSON(w, http.StatusOK, req)
	})
	mux.HandleFunc("POST /admin/clear-fails", func(w http.ResponseWriter, _ *http.Request) {
		s.ClearFails()
		writeJSON(w, http.StatusOK, map[string]bool{"cleared": true})
	})
	mux.HandleFunc("POST /admin/interval", func(w http.ResponseWriter, r *http.Request) {
		var req IntervalRequest
		if err := json.Unmarshal(readBody(r), &req); err != nil || req.IntervalS < 1 {
			adminError(w, http.StatusBadRequest, fmt.Errorf("interval_s must be a whole number of seconds, at least 1"))
			return
		}
		s.SetCheckinInterval(req.IntervalS)
		writeJSON(w, http.StatusOK, req)
	})
	mux.HandleFunc("GET /admin/reports", func(w http.ResponseWriter, r *http.Request) {
		env, ok := adminEnv(w, r)
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, s.Reports(env))
	})
	mux.HandleFunc("GET /admin/counts", func(w http.ResponseWriter, r *http.Request) {
		env, ok := adminEnv(w, r)
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, s.Counts(env))
	})
	mux.HandleFunc("GET /admin/releases", func(w http.ResponseWriter, r *http.Request) {
		env, ok := adminEnv(w, r)
		if !ok {
			return
		}
		desired := s.Desired(env)
		out := []ReleaseInfo{}
		for _, name := range s.Releases(env) {
			sha, _, _ := s.Release(env, name)
			out = append(out, ReleaseInfo{Name: name, Sha: sha, Desired: sha == desired})
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /admin/fleet", func(w http.ResponseWriter, r *http.Request) {
		all := r.URL.Query().Get("all")
		writeJSON(w, http.StatusOK, s.Fleet(all == "1" || all == "true"))
	})
	return mux
}

func adminDecode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.Unmarshal(readBody(r), v); err != nil {
		adminError(w, http.StatusBadRequest, fmt.Errorf("body: %w", err))
		return false
	}
	var env struct {
		Env string `json:"env"`
	}
	b, _ := json.Marshal(v)
	_ = json.Unmarshal(b, &env)
	if env.Env == "" {
		adminError(w, http.StatusBadRequest, fmt.Errorf("env is required"))
		return false
	}
	return true
}

// adminEnv is the ?env= of a GET; without one it answers 400 and reports false.
func adminEnv(w http.ResponseWriter, r *http.Request) (string, bool) {
	env := r.URL.Query().Get("env")
	if env == "" {
		adminError(w, http.StatusBadRequest, fmt.Errorf("env is required"))
		return "", false
	}
	return env, true
}

func adminError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}
