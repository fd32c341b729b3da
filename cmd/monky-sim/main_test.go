package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
)

// syncBuffer is a bytes.Buffer safe for the serving goroutine and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

const demoEnv = "env-demo-01"

func post(t *testing.T, url, bearer string, hdrName string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	if bearer != "" {
		req.Header.Set(hdrName, bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func TestServeAndAdminCLIRoundTrip(t *testing.T) {
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addrs.json")
	kitDir := filepath.Join(dir, "kit")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var serveOut, serveErr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--releases", "../../testdata/demo", "--env", demoEnv,
			"--kit", kitDir, "--addr-file", addrFile}, strings.NewReader(""), &serveOut, &serveErr)
	}()
	var addrs Addrs
	deadline := time.Now().Add(10 * time.Second)
	for {
		raw, err := os.ReadFile(addrFile)
		if err == nil && json.Unmarshal(raw, &addrs) == nil {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d early: %s", code, serveErr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no addr file; stderr: %s", serveErr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSpace(serveOut.String()), "\n")
	if len(lines) != 3 || lines[0] != "tenancy "+addrs.Tenancy || lines[1] != "bao "+addrs.Bao || lines[2] != "admin "+addrs.Admin {
		t.Errorf("serve printed %q, addr file %+v", lines, addrs)
	}

	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(args, "--addr-file", addrFile), strings.NewReader("from-stdin\n"), &out, &errb)
		return code, out.String(), errb.String()
	}

	// The kit serve wrote logs in and checks in; nothing is desired yet.
	grant, err := os.ReadFile(filepath.Join(kitDir, "bootstrap.jwt"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(filepath.Join(kitDir, "config.yaml"))
	if !strings.Contains(string(cfg), `base_url: "`+addrs.Tenancy+`"`) || !strings.Contains(string(cfg), `addr: "`+addrs.Bao+`"`) {
		t.Errorf("kit config does not point at the sim:\n%s", cfg)
	}
	st, body := post(t, addrs.Bao+"/v1/auth/jwt-tenancy/login", "", "", map[string]string{"role": "see-env", "jwt": strings.TrimSpace(string(grant))})
	if st != 200 {
		t.Fatalf("login with the kit grant: %d %s", st, body)
	}
	var login struct {
		Auth struct {
			ClientToken string `json:"client_token"`
		} `json:"auth"`
	}
	_ = json.Unmarshal(body, &login)
	tok := login.Auth.ClientToken
	checkin := func() effects.CheckinResponse {
		t.Helper()
		st, body := post(t, addrs.Tenancy+"/v1/agent/checkin", "Bearer "+tok, "Authorization", effects.CheckinRequest{EnvID: demoEnv})
		if st != 200 {
			t.Fatalf("check-in: %d %s", st, body)
		}
		var cr effects.CheckinResponse
		_ = json.Unmarshal(body, &cr)
		return cr
	}
	if cr := checkin(); cr.Action != "none" {
		t.Errorf("before desire: action %q", cr.Action)
	}

	code, out, errs := cli("desire", "--env", demoEnv, "--release", "v2")
	if code != 0 {
		t.Fatalf("desire: %d %s", code, errs)
	}
	cr := checkin()
	if cr.Action != "apply" || cr.DesiredSha == "" || !strings.Contains(out, cr.DesiredSha) {
		t.Errorf("after desire v2: %+v (cli said %q)", cr, out)
	}
	if code, _, errs := cli("desire", "--env", demoEnv, "--release", "v9"); code != 1 || !strings.Contains(errs, "v9") {
		t.Errorf("unknown release: %d %q", code, errs)
	}

	code, out, _ = cli("secret", "--env", demoEnv, "--name", "gemini", "--value", "cli-secret-value")
	if code != 0 || out != "4\n" {
		t.Errorf("secret: %d %q, want version 4 (secrets.json loaded three)", code, out)
	}
	code, out, _ = cli("secret", "--env", demoEnv, "--name", "db", "--key", "password", "--value", "-")
	if code != 0 || out != "2\n" {
		t.Errorf("secret from stdin: %d %q", code, out)
	}
	get := func(path string) (int, string) {
		req, _ := http.NewRequest("GET", addrs.Bao+"/v1/"+path, nil)
		req.Header.Set("X-Vault-Token", tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := get("monky/data/" + demoEnv + "/see/gemini?version=2"); st != 200 || !strings.Contains(b, "demo-gemini-key-2") {
		t.Errorf("pinned version from secrets.json: %d %s", st, b)
	}
	if st, b := get("monky/data/" + demoEnv + "/see/db"); st != 200 || !strings.Contains(b, `"password":"from-stdin"`) {
		t.Errorf("stdin secret: %d %s", st, b)
	}

	st, body = post(t, addrs.Tenancy+"/v1/agent/report", "Bearer "+tok, "Authorization",
		effects.Report{EnvID: demoEnv, Sha: cr.DesiredSha, Result: "applied", AgentVersion: "1.0.0"})
	if st != 200 {
		t.Fatalf("report: %d %s", st, body)
	}
	code, out, _ = cli("reports", "--env", demoEnv)
	var rep effects.Report
	if code != 0 || strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &rep) != nil || rep.Sha != cr.DesiredSha || rep.Result != "applied" {
		t.Errorf("reports: %d %q", code, out)
	}
	code, out, _ = cli("counts", "--env", demoEnv)
	var counts struct {
		Checkins int `json:"checkins"`
		Logins   int `json:"logins"`
		KVReads  int `json:"kv_reads"`
		Reports  int `json:"reports"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &counts) != nil || counts.Checkins != 2 || counts.Logins != 1 || counts.KVReads != 2 || counts.Reports != 1 {
		t.Errorf("counts: %d %q", code, out)
	}
	code, out, _ = cli("releases", "--env", demoEnv)
	if code != 0 || !strings.Contains(out, `"name":"v1"`) || !strings.Contains(out, `"name":"v2","sha":"`+cr.DesiredSha+`","desired":true`) {
		t.Errorf("releases: %d %q", code, out)
	}

	code, out, _ = cli("fleet", "--all")
	if code != 0 || !strings.Contains(out, demoEnv+"  converged") || !strings.HasSuffix(out, "1 env(s): converged 1\n") {
		t.Errorf("fleet --all: %d %q", code, out)
	}
	why := &effects.ReportWhy{Code: "UNHEALTHY", Verdict: "needs_person", Since: "2026-12-01T14:02:00Z", Fault: "f", Evidence: "e", Next: "checked again at every tick", Fix: "x"}
	st, body = post(t, addrs.Tenancy+"/v1/agent/report", "Bearer "+tok, "Authorization",
		effects.Report{EnvID: demoEnv, Sha: cr.DesiredSha, Result: "failed", AgentVersion: "1.0.0", Detail: "UNHEALTHY: api", Why: why})
	if st != 200 {
		t.Fatalf("failed report: %d %s", st, body)
	}
	code, out, _ = cli("fleet")
	if code != 0 || !strings.Contains(out, demoEnv+"  needs_person  UNHEALTHY  2026-12-01T14:02:00Z  checked again at every tick") {
		t.Errorf("fleet: %d %q", code, out)
	}
	code, out, _ = cli("fleet", "--json")
	var rows []struct {
		Env, Verdict, Code, Since, Next string
		Why                             *effects.ReportWhy
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].Env != demoEnv || rows[0].Why == nil || *rows[0].Why != *why {
		t.Errorf("fleet --json: %d %q", code, out)
	}

	code, _, _ = cli("retire", "--env", demoEnv, "--purge")
	if cr := checkin(); code != 0 || cr.Action != "down" || !cr.PurgeVolumes {
		t.Errorf("retire: %d %+v", code, cr)
	}

	kit2 := filepath.Join(dir, "kit2")
	if code, _, errs := cli("reveal", "--env", demoEnv, "--kit", kit2); code != 0 {
		t.Fatalf("reveal: %d %s", code, errs)
	}
	if fi, err := os.Stat(filepath.Join(kit2, "bootstrap.jwt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("reveal's bootstrap.jwt: %v %v", fi, err)
	}
	st, body = post(t, addrs.Tenancy+"/v1/agent/checkin", "Bearer "+tok, "Authorization", effects.CheckinRequest{EnvID: demoEnv})
	if st != 401 || !strings.Contains(string(body), "AGENT_UNAUTHENTICATED") {
		t.Errorf("the first kit's token after a re-reveal: %d %s", st, body)
	}

	if code, _, _ := cli("counts"); code != 2 {
		t.Errorf("counts without --env: %d, want 2", code)
	}
	for _, secret := range []string{"cli-secret-value", "from-stdin", tok, strings.TrimSpace(string(grant))} {
		if strings.Contains(serveErr.String(), secret) || strings.Contains(serveOut.String(), secret) {
			t.Errorf("serve's output carries a secret")
		}
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exited %d after cancel: %s", code, serveErr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
}
