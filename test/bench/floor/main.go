// Command floor is the least a heartbeat tick can do, for comparison with the agent: read
// the token, run `docker compose -p P ps --format json` once, POST the check-in and POST the
// report, then exit. No config file, no state file, no lock, no journal: whatever the agent
// spends beyond this program is its own overhead. It is a measurement program only. With
// MONKY_DEPLOYD_TRACE set it prints the same phases as the agent (internal/phase).
//
//	floor -tenancy URL -token FILE -env ENV -project P -dir DIR [-docker BIN]
//
// Built with -tags design it is the design floor (design.go): the same tick plus the least the
// design card asks of every heartbeat — its libraries linked and initialised (urfave/cli,
// go.yaml.in/yaml, zerolog, looplab/fsm, bbolt, compose-go's dotenv, Prometheus' expfmt over
// client_model), config.yaml read, the tick lock taken, one bbolt read before the check-in and
// one fsync'd bbolt write after the report. What the agent spends beyond it is what the agent's
// own code costs; what it spends over the plain floor is the design's price.
//
//	floor … -config FILE -state DIR
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/internal/phase"
)

type container struct {
	Name    string `json:"name"`
	Service string `json:"service"`
	State   string `json:"state"`
	Health  string `json:"health,omitempty"`
}

func main() {
	phase.Begin()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
	phase.Mark("exit")
	phase.Print(os.Stderr)
}

func run() error {
	tenancyURL := flag.String("tenancy", "", "tenancy base URL")
	tokenFile := flag.String("token", "", "the agent's stored token")
	env := flag.String("env", "", "env_id")
	project := flag.String("project", "", "compose project")
	dir := flag.String("dir", ".", "the current release's directory")
	docker := flag.String("docker", "docker", "docker CLI")
	mandates := designFlags()
	flag.Parse()
	phase.Mark("cli")
	if err := mandates.before(); err != nil {
		return err
	}

	tok, err := os.ReadFile(*tokenFile)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	token := strings.TrimSpace(string(tok))
	phase.Mark("token")

	mandates.pin(*dir)
	cmd := exec.Command(*docker, "compose", "-p", *project, "ps", "--all", "--format", "json")
	cmd.Dir = *dir
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("compose ps: %w", err)
	}
	cs := []container{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var c struct{ Name, Service, State, Health string }
		if json.Unmarshal(sc.Bytes(), &c) == nil && c.Name != "" {
			cs = append(cs, container{c.Name, c.Service, c.State, c.Health})
		}
	}

	phase.Mark("compose-ps")

	hc := &http.Client{Timeout: 30 * time.Second}
	var ans struct {
		DesiredSha string `json:"desired_sha"`
	}
	host, _ := os.Hostname()
	if err := post(hc, *tenancyURL+"/v1/agent/checkin", token, map[string]any{
		"env_id": *env, "agent_version": "floor", "applied_sha": "", "host": host, "containers": cs}, &ans); err != nil {
		return fmt.Errorf("checkin: %w", err)
	}
	phase.Mark("check-in")
	if err := post(hc, *tenancyURL+"/v1/agent/report", token, map[string]any{
		"env_id": *env, "sha": ans.DesiredSha, "result": "applied", "agent_version": "floor", "containers": cs}, nil); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	phase.Mark("report")
	return mandates.after()
}

func post(hc *http.Client, url, token string, body, into any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	if into == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(into)
}
