package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// BaoHandler serves the OpenBao subset: POST or PUT /v1/auth/<auth mount>/login,
// /v1/auth/token/{lookup-self,renew-self,revoke-self,lookup} and KV-v2 reads
// GET /v1/<kv mount>/data/<env>/see/<name>[?version=n]. Fault rules are applied first.
func (s *Sim) BaoHandler() http.Handler {
	mux := http.NewServeMux()
	for _, m := range []string{"POST", "PUT"} { // OpenBao takes either for a write
		mux.HandleFunc(m+" /v1/auth/{mount}/login", s.login)
		mux.HandleFunc(m+" /v1/auth/token/lookup-self", s.lookupSelf)
		mux.HandleFunc(m+" /v1/auth/token/renew-self", s.renewSelf)
		mux.HandleFunc(m+" /v1/auth/token/revoke-self", s.revokeSelf)
		mux.HandleFunc(m+" /v1/auth/token/lookup", s.lookup)
	}
	mux.HandleFunc("GET /v1/auth/token/lookup-self", s.lookupSelf)
	mux.HandleFunc("GET /v1/{rest...}", s.kvRead)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.applyFail(w, r, true) {
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// liveTokenLocked returns the token called v when it exists, is unrevoked and unexpired.
func (s *Sim) liveTokenLocked(v string) *token {
	t := s.tokens[v]
	if t == nil || t.revoked || !s.now().Before(t.expires) {
		return nil
	}
	return t
}

func (s *Sim) selfToken(w http.ResponseWriter, r *http.Request) *token {
	s.mu.Lock()
	t := s.liveTokenLocked(r.Header.Get("X-Vault-Token"))
	s.mu.Unlock()
	if t == nil {
		baoError(w, http.StatusForbidden, "permission denied")
	}
	return t
}

func (s *Sim) login(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("mount") != s.opts.AuthMount {
		baoError(w, http.StatusNotFound, fmt.Sprintf("no handler for route %q. route entry not found.",
			"auth/"+r.PathValue("mount")+"/login"))
		return
	}
	var req struct {
		Role string `json:"role"`
		JWT  string `json:"jwt"`
	}
	if err := json.Unmarshal(readBody(r), &req); err != nil {
		baoError(w, http.StatusBadRequest, "failed to parse JSON input: "+err.Error())
		return
	}
	if req.JWT == "" {
		baoError(w, http.StatusBadRequest, "missing token")
		return
	}
	if req.Role != s.opts.Role {
		baoError(w, http.StatusBadRequest, fmt.Sprintf("role %q could not be found", req.Role))
		return
	}
	c, err := s.signer.verify(req.JWT)
	if err != nil {
		s.opts.Logf("sim: login refused: %v", err)
		baoError(w, http.StatusBadRequest, err.Error())
		return
	}
	now := s.now()
	var refuse string
	switch {
	case !c.hasAudience(GrantAudience):
		refuse = "error validating claims: invalid audience (aud) claim: audience provided in the token does not match bound audiences"
	case c.Exp == 0 || !now.Before(time.Unix(c.Exp, 0)):
		refuse = "error validating claims: token is expired (exp)"
	case c.Kind != GrantKind:
		refuse = `error validating claims: claim "kind" does not match any associated bound claim values`
	case c.EnvID == "":
		refuse = `error validating claims: claim "env_id" is missing`
	case c.Sub != "agent:"+c.EnvID:
		refuse = `error validating claims: claim "sub" does not match any associated bound claim values`
	}
	if refuse != "" {
		s.opts.Logf("sim: login refused: %s", refuse)
		baoError(w, http.StatusBadRequest, refuse)
		return
	}
	t := &token{
		value: "s." + randomBase62(24), accessor: randomBase62(24), envID: c.EnvID, jti: c.JTI,
		role: req.Role, issued: now, expires: now.Add(s.opts.TokenTTL), maxUntil: now.Add(s.opts.TokenMaxTTL),
	}
	if t.expires.After(t.maxUntil) {
		t.expires = t.maxUntil
	}
	s.mu.Lock()
	s.tokens[t.value] = t
	s.envLocked(c.EnvID).counts.Logins++
	s.mu.Unlock()
	s.opts.Logf("sim: login %s (grant %s)", c.EnvID, c.JTI)
	writeJSON(w, http.StatusOK, map[string]any{
		"request_id": randomHex(8), "lease_id": "", "renewable": false, "lease_duration": 0,
		"data": nil, "wrap_info": nil, "warnings": nil,
		"auth": s.authBlock(t, now),
	})
}

func (s *Sim) meta(t *token) map[string]string {
	return map[string]string{"env_id": t.envID, "grant_jti": t.jti, "role": t.role}
}

func (s *Sim) authBlock(t *token, now time.Time) map[string]any {
	return map[string]any{
		"client_token": t.value, "accessor": t.accessor,
		"policies": []string{"default", "see-env"}, "token_policies": []string{"default", "see-env"},
		"metadata": s.meta(t), "lease_duration": int(t.expires.Sub(now).Seconds()),
		"renewable": true, "entity_id": "", "token_type": "service", "orphan": true,
	}
}

// tokenData is the data block of token lookups, in Vault's shape.
func (s *Sim) tokenData(t *token) map[string]any {
	now := s.now()
	return map[string]any{
		"accessor": t.accessor, "creation_time": t.issued.Unix(),
		"creation_ttl": int(s.opts.TokenTTL.Seconds()), "display_name": s.opts.AuthMount + "-agent:" + t.envID,
		"entity_id": "", "expire_time": t.expires.UTC().Format(time.RFC3339Nano),
		"explicit_max_ttl": int(s.opts.TokenMaxTTL.Seconds()), "id": t.value,
		"issue_time": t.issued.UTC().Format(time.RFC3339Nano), "meta": s.meta(t), "num_uses": 0,
		"orphan": true, "path": "auth/" + s.opts.AuthMount + "/login",
		"policies": []string{"default", "see-env"}, "renewable": true,
		"ttl": int(t.expires.Sub(now).Seconds()), "type": "service",
	}
}

func (s *Sim) lookupSelf(w http.ResponseWriter, r *http.Request) {
	t := s.selfToken(w, r)
	if t == nil {
		return
	}
	s.mu.Lock()
	data := s.tokenData(t)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

func (s *Sim) lookup(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(readBody(r), &req); err != nil || req.Token == "" {
		baoError(w, http.StatusBadRequest, "missing token")
		return
	}
	s.mu.Lock()
	t := s.liveTokenLocked(req.Token)
	var data map[string]any
	if t != nil {
		data = s.tokenData(t)
	}
	s.mu.Unlock()
	if t == nil {
		baoError(w, http.StatusForbidden, "bad token")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

// parseIncrement reads renew-self's increment: a duration string ("24h", "3600s") or seconds.
func parseIncrement(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var n float64
	if err := json.Unmarshal(raw, &n); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return 0, fmt.Errorf("increment is neither a number nor a string")
	}
	if str == "" {
		return 0, nil
	}
	if secs, err := strconv.Atoi(str); err == nil {
		return time.Duration(secs) * time.Second, nil
	}
	d, err := time.ParseDuration(str)
	if err != nil {
		return 0, fmt.Errorf("increment %q: %w", str, err)
	}
	return d, nil
}

func (s *Sim) renewSelf(w http.ResponseWriter, r *http.Request) {
	t := s.selfToken(w, r)
	if t == nil {
		return
	}
	var req struct {
		Increment json.RawMessage `json:"increment"`
	}
	if b := readBody(r); len(b) > 0 {
		if err := json.Unmarshal(b, &req); err != nil {
			baoError(w, http.StatusBadRequest, "failed to parse JSON input: "+err.Error())
			return
		}
	}
	inc, err := parseIncrement(req.Increment)
	if err != nil {
		baoError(w, http.StatusBadRequest, err.Error())
		return
	}
	if inc <= 0 {
		inc = s.opts.TokenTTL
	}
	now := s.now()
	s.mu.Lock()
	var warnings []string
	t.expires = now.Add(inc)
	if t.expires.After(t.maxUntil) {
		t.expires = t.maxUntil
		warnings = append(warnings, "TTL of \""+inc.String()+"\" exceeded the effective max_ttl; TTL value is capped accordingly")
	}
	s.envLocked(t.envID).counts.Renewals++
	auth := s.authBlock(t, now)
	s.mu.Unlock()
	s.opts.Logf("sim: renew %s ttl=%s", t.envID, t.expires.Sub(now))
	writeJSON(w, http.StatusOK, map[string]any{"auth": auth, "warnings": warnings})
}

func (s *Sim) revokeSelf(w http.ResponseWriter, r *http.Request) {
	t := s.selfToken(w, r)
	if t == nil {
		return
	}
	s.mu.Lock()
	t.revoked = true
	s.envLocked(t.envID).counts.Revocations++
	s.mu.Unlock()
	s.opts.Logf("sim: token of %s revoked by its holder", t.envID)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sim) kvRead(w http.ResponseWriter, r *http.Request) {
	t := s.selfToken(w, r)
	if t == nil {
		return
	}
	s.mu.Lock()
	s.envLocked(t.envID).counts.KVReads++
	s.mu.Unlock()
	rest := r.PathValue("rest")
	prefix := s.opts.KVMount + "/data/" + t.envID + "/see/"
	name, ok := strings.CutPrefix(rest, prefix)
	if !ok || name == "" || strings.Contains("/"+name+"/", "/../") || strings.Contains("/"+name+"/", "/./") {
		s.opts.Logf("sim: kv read of %s by %s: permission denied", rest, t.envID)
		baoError(w, http.StatusForbidden, "permission denied")
		return
	}
	version := 0
	if q := r.URL.Query().Get("version"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 {
			baoError(w, http.StatusBadRequest, "invalid version: "+q)
			return
		}
		version = n
	}
	s.mu.Lock()
	vs := s.envLocked(t.envID).secrets[name]
	if version == 0 {
		version = len(vs)
	}
	if version == 0 || version > len(vs) {
		s.mu.Unlock()
		baoError(w, http.StatusNotFound)
		return
	}
	sv := vs[version-1]
	meta := map[string]any{
		"created_time": sv.created.UTC().Format(time.RFC3339Nano), "custom_metadata": nil,
		"deletion_time": "", "destroyed": false, "version": version,
	}
	var data map[string]string
	status := http.StatusOK
	if !sv.deleted.IsZero() {
		meta["deletion_time"] = sv.deleted.UTC().Format(time.RFC3339Nano)
		status = http.StatusNotFound
	} else {
		data = make(map[string]string, len(sv.data))
		for k, v := range sv.data {
			data[k] = v
		}
	}
	s.mu.Unlock()
	s.opts.Logf("sim: kv read %s version %d by %s -> %d", rest, version, t.envID, status)
	body := map[string]any{
		"request_id": randomHex(8), "lease_id": "", "renewable": false, "lease_duration": 0,
		"data":      map[string]any{"data": data, "metadata": meta},
		"wrap_info": nil, "warnings": nil, "auth": nil,
	}
	writeJSON(w, status, body)
}
