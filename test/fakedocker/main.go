// Command fakedocker is a recording stand-in for the docker CLI, for tests and for
// `make demo` when no engine answers. It starts no container and talks to no daemon: it
// records each call and keeps a pretend compose state in a directory.
//
// Build it as `docker` on a test's PATH:
//
//	go build -o <tmp>/docker ./test/fakedocker
//
// The agent hands docker an environment it sets whole, so a test points docker_bin at a
// wrapper that sets the knobs and execs the stub (testkit.FakeDockerFor writes one).
//
// Knobs (environment):
//
//	FAKE_DOCKER_LOG     a file; one JSON line is appended per call:
//	                    {"argv": [...], "dir": cwd, "docker_config": $DOCKER_CONFIG,
//	                     "interactive_no_cli": $COMPOSE_INTERACTIVE_NO_CLI,
//	                     "compose_env": [other COMPOSE_* names in its environment],
//	                     "env": [every name in its environment but PWD, SHLVL and _, which
//	                              a wrapper's shell sets],
//	                     "api_key_set": whether API_KEY is in its environment,
//	                     "files": {each -f file: its content when the call was made}}
//	FAKE_DOCKER_STATE   the state directory (default: <the stub's path>.state when that
//	                    directory exists, else <tmp>/fakedocker-<uid>). In it:
//	  projects/<P>.json   what `compose -p P up` started (written by the stub)
//	  volumes-removed     one line per `compose -p P down -v`: P (written by the stub)
//	  ps-array            when present, `compose ps --format json` prints one JSON array
//	                      (compose < 2.21) instead of one object per line
//	  pull-error          when present, `compose pull` prints its content to stderr, exit 1
//	                      (e.g. "Error response from daemon: no basic auth credentials")
//	  up-error            when present, `compose up` prints its content to stderr, exit 1
//	  ps-error            when present, `compose ps` prints its content to stderr, exit 1
//	                      (e.g. "Cannot connect to the Docker daemon …": the engine is down)
//	  up-sleep            seconds `compose up` blocks before it records anything
//	  up-hold             when present, `compose up` blocks until it is removed (at most 5
//	                      minutes): a suite lands something mid-apply at its own pace
//	  unhealthy           service names, one per line, that `ps` reports "unhealthy"
//	  exited              lines "SERVICE CODE": that service's container exits with CODE at
//	                      every start (a one-shot done: 0; a migration that fails: 3)
//	  restarting          service names, one per line, whose containers are restarting (a
//	                      crash loop: compose up does not mend it)
//	  killed              service names, one per line, whose containers were killed
//	                      (Exited (137)); the next `compose up` starts them again
//	  gone                service names, one per line, whose containers were removed by
//	                      hand; the next `compose up` creates them again
//	  uptime              how long running containers have been up, in compose's words
//	                      (default "About an hour"; "3 seconds" for a fresh start)
//	  restarted           service names, one per line, whose containers the engine restarted
//	                      since the last look: running, same ID, "Up 2 seconds" at every `ps`
//	  log-line            lines `compose logs` prints for every service, each with the
//	                      service's prefix as compose adds it (plant a canary)
//	  engine-down         when present, `info` fails as it does with the daemon stopped
//	                      ("Cannot connect to the Docker daemon …", exit 1)
//	  root-dir            what `docker info -f '{{.DockerRootDir}}'` prints (default: the
//	                      state directory itself)
//	  images              what `image ls` prints, one repository:tag per line; `image rm R…`
//	                      removes R's lines (an R not listed: exit 1, "No such image")
//
// `compose -p P up -d --remove-orphans` reads its compose files as compose does: the -f files;
// without -f, COMPOSE_FILE from the environment, else from the project directory's .env (or
// --env-file), else compose.yaml plus compose.override.yaml when present. It records P's
// services as running (with the image and privileged flag the files give them), health
// "healthy" when the service has a healthcheck, else "". `ps` lists the running (and
// restarting) ones as compose does, and with --all every one, exited too. `down` forgets them. `version`, `compose version`,
// `info`, `image prune -f` print fixed answers. Anything else exits 1 saying so.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

type container struct {
	Name       string `json:"Name"`
	Service    string `json:"Service"`
	State      string `json:"State"`
	Health     string `json:"Health"`
	Project    string `json:"Project"`
	Image      string `json:"Image,omitempty"`
	Privileged bool   `json:"Privileged,omitempty"`
	ExitCode   int    `json:"ExitCode"`
	Status     string `json:"Status"`
	ID         string `json:"ID"`
}

func main() {
	record()
	os.Exit(run(os.Args[1:]))
}

func record() {
	logPath := os.Getenv("FAKE_DOCKER_LOG")
	if logPath == "" {
		return
	}
	cwd, _ := os.Getwd()
	composeEnv := []string{}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "COMPOSE_") && k != "COMPOSE_INTERACTIVE_NO_CLI" {
			composeEnv = append(composeEnv, k)
		}
	}
	names := []string{}
	for _, kv := range os.Environ() {
		// the wrapper's shell adds PWD (and SHLVL, _ for some shells): not the agent's
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "FAKE_DOCKER_") && k != "PWD" && k != "SHLVL" && k != "_" {
			names = append(names, k)
		}
	}
	files := map[string]string{}
	for i, a := range os.Args {
		if (a == "-f" || a == "--file") && i+1 < len(os.Args) {
			b, _ := os.ReadFile(os.Args[i+1])
			files[os.Args[i+1]] = string(b)
		}
	}
	line, _ := json.Marshal(map[string]any{
		"env":                names,
		"files":              files,
		"argv":               os.Args[1:],
		"dir":                cwd,
		"docker_config":      os.Getenv("DOCKER_CONFIG"),
		"interactive_no_cli": os.Getenv("COMPOSE_INTERACTIVE_NO_CLI"),
		"compose_env":        composeEnv,
		"api_key_set":        os.Getenv("API_KEY") != "",
	})
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakedocker: log:", err)
		return
	}
	defer f.Close()
	f.Write(append(line, '\n'))
}

func stateDir() string {
	if d := os.Getenv("FAKE_DOCKER_STATE"); d != "" {
		return d
	}
	// a directory <the stub's path>.state: the state of a stub the agent runs with its own
	// environment, found without a wrapper (make bench, where a wrapper's exec would be timed)
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe + ".state"); err == nil && fi.IsDir() {
			return exe + ".state"
		}
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("fakedocker-%d", os.Getuid()))
}

func knob(name string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(stateDir(), name))
	if err != nil {
		return "", false
	}
	return string(b), true
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	return 1
}

func run(args []string) int {
	if len(args) == 0 {
		return fail("fakedocker: no command")
	}
	switch args[0] {
	case "version":
		fmt.Println("Client: Docker Engine - Community\n Version:           29.0.0-fake\n\nServer: Docker Engine - Community\n Engine:\n  Version:          29.0.0-fake")
		return 0
	case "info":
		if _, down := knob("engine-down"); down {
			return fail("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")
		}
		if len(args) >= 3 && args[2] == "{{.ServerVersion}}" {
			fmt.Println("29.0.0-fake")
			return 0
		}
		if root, ok := knob("root-dir"); ok {
			fmt.Println(strings.TrimSpace(root))
		} else {
			fmt.Println(stateDir())
		}
		return 0
	case "image":
		if len(args) >= 2 && args[1] == "prune" {
			fmt.Println("Total reclaimed space: 0B")
			return 0
		}
		if len(args) >= 2 && args[1] == "ls" {
			s, _ := knob("images")
			fmt.Print(s)
			return 0
		}
		if len(args) >= 5 && args[1] == "inspect" && args[2] == "--format" && args[3] == "{{.Size}}" {
			// every image the stub holds is image-size bytes (default 1 MiB)
			size := "1048576"
			if s, ok := knob("image-size"); ok {
				size = strings.TrimSpace(s)
			}
			fmt.Println(size)
			return 0
		}
		if len(args) >= 3 && args[1] == "rm" {
			return imageRm(args[2:])
		}
	case "compose":
		return compose(args[1:])
	}
	return fail("fakedocker: unknown command %q", strings.Join(args, " "))
}

func compose(args []string) int {
	project, envFile, projectDir := "", "", ""
	var files []string
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-p" || a == "--project-name":
			if i+1 >= len(args) {
				return fail("flag needs an argument: %s", a)
			}
			i++
			project = args[i]
		case strings.HasPrefix(a, "--project-name="):
			project = strings.TrimPrefix(a, "--project-name=")
		case a == "-f" || a == "--file" || a == "--env-file" || a == "--project-directory":
			if i+1 >= len(args) {
				return fail("flag needs an argument: %s", a)
			}
			i++
			switch a {
			case "--env-file":
				envFile = args[i]
			case "--project-directory":
				projectDir = args[i]
			default:
				files = append(files, args[i])
			}
		case strings.HasPrefix(a, "-"):
			return fail("fakedocker: unknown compose flag %s", a)
		default:
			goto sub
		}
	}
sub:
	if i >= len(args) {
		return fail("fakedocker: compose needs a subcommand")
	}
	sub, rest := args[i], args[i+1:]
	if sub == "version" {
		if v, ok := knob("compose-version"); ok { // a box with another compose (its whole answer, or an error)
			if msg, isErr := strings.CutPrefix(strings.TrimSpace(v), "error: "); isErr {
				return fail("%s", msg)
			}
			fmt.Print(v)
			return 0
		}
		fmt.Println("Docker Compose version v2.40.0-fake")
		return 0
	}
	if project == "" {
		cwd, _ := os.Getwd()
		project = filepath.Base(cwd)
	}
	switch sub {
	case "up":
		return up(project, composeFiles(files, envFile, projectDir))
	case "ps":
		return ps(project, rest)
	case "down":
		return down(project, rest)
	case "pull":
		if msg, ok := knob("pull-error"); ok {
			fmt.Fprint(os.Stderr, msg)
			return 1
		}
		fmt.Fprintln(os.Stderr, "Pulled")
		return 0
	case "logs":
		return logs(project)
	}
	return fail("fakedocker: unknown compose subcommand %q", sub)
}

func projectPath(p string) string { return filepath.Join(stateDir(), "projects", p+".json") }

func load(p string) []container {
	var cs []container
	b, err := os.ReadFile(projectPath(p))
	if err == nil {
		json.Unmarshal(b, &cs)
	}
	return cs
}

// composeFiles are the files compose loads: the -f files, else COMPOSE_FILE from the
// environment or the .env, else the default file and its override.
func composeFiles(files []string, envFile, projectDir string) []string {
	if len(files) > 0 {
		return files
	}
	if projectDir == "" {
		projectDir = "."
	}
	if envFile == "" {
		envFile = filepath.Join(projectDir, ".env")
	}
	cf := os.Getenv("COMPOSE_FILE")
	if b, err := os.ReadFile(envFile); err == nil && cf == "" {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && strings.TrimSpace(k) == "COMPOSE_FILE" {
				cf = strings.Trim(strings.TrimSpace(v), `"'`)
			}
		}
	}
	if cf != "" {
		for _, f := range strings.Split(cf, ":") {
			files = append(files, filepath.Join(projectDir, f))
		}
		return files
	}
	for _, f := range []string{"compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"} {
		if _, err := os.Stat(filepath.Join(projectDir, f)); err == nil {
			files = append(files, filepath.Join(projectDir, f))
			break
		}
	}
	for _, f := range []string{"compose.override.yaml", "compose.override.yml", "docker-compose.override.yaml", "docker-compose.override.yml"} {
		if _, err := os.Stat(filepath.Join(projectDir, f)); err == nil && len(files) > 0 {
			files = append(files, filepath.Join(projectDir, f))
			break
		}
	}
	return files
}

func up(project string, files []string) int {
	if len(files) == 0 {
		return fail("no configuration file provided: not found")
	}
	var doc struct {
		Services map[string]map[string]any `yaml:"services"`
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			return fail("open %s: %v", file, err)
		}
		var one struct {
			Services map[string]map[string]any `yaml:"services"`
		}
		if err := yaml.Unmarshal(raw, &one); err != nil {
			return fail("yaml: %v", err)
		}
		if doc.Services == nil {
			doc.Services = map[string]map[string]any{}
		}
		for n, svc := range one.Services {
			if doc.Services[n] == nil {
				doc.Services[n] = map[string]any{}
			}
			for k, v := range svc {
				doc.Services[n][k] = v
			}
		}
	}
	if s, ok := knob("up-sleep"); ok {
		if n, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			time.Sleep(time.Duration(n * float64(time.Second)))
		}
	}
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, held := knob("up-hold"); !held {
			break
		}
	}
	if msg, ok := knob("up-error"); ok {
		fmt.Fprint(os.Stderr, msg)
		return 1
	}
	names := make([]string, 0, len(doc.Services))
	for n := range doc.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	cs := make([]container, 0, len(names))
	for _, n := range names {
		c := container{Name: project + "-" + n + "-1", Service: n, State: "running", Project: project}
		id := sha256.Sum256(fmt.Appendf(nil, "%s %d", c.Name, time.Now().UnixNano())) // a new container, a new ID
		c.ID = hex.EncodeToString(id[:])
		c.Image, _ = doc.Services[n]["image"].(string)
		c.Privileged, _ = doc.Services[n]["privileged"].(bool)
		if _, ok := doc.Services[n]["healthcheck"]; ok {
			c.Health = "healthy"
		}
		cs = append(cs, c)
		fmt.Fprintf(os.Stderr, " Container %s  Started\n", c.Name)
	}
	if err := save(project, cs); err != nil {
		return fail("fakedocker: %v", err)
	}
	for _, k := range []string{"killed", "gone", "restarted"} { // compose up starts and creates them again
		os.Remove(filepath.Join(stateDir(), k))
	}
	return 0
}

func save(project string, cs []container) error {
	p := projectPath(project)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(cs)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func ps(project string, args []string) int {
	if msg, ok := knob("ps-error"); ok {
		fmt.Fprint(os.Stderr, msg)
		return 1
	}
	all := false
	for _, a := range args {
		all = all || a == "--all" || a == "-a"
	}
	bad, restarting, gone, killed, restarted := knobSet("unhealthy"), knobSet("restarting"), knobSet("gone"), knobSet("killed"), knobSet("restarted")
	exited := map[string]int{}
	for l := range knobSet("exited") {
		if f := strings.Fields(l); len(f) == 2 {
			exited[f[0]], _ = strconv.Atoi(f[1])
		}
	}
	uptime := "About an hour"
	if s, ok := knob("uptime"); ok {
		uptime = strings.TrimSpace(s)
	}
	var out []container
	for _, c := range load(project) {
		if gone[c.Service] {
			continue
		}
		if bad[c.Service] {
			c.Health = "unhealthy"
		}
		c.Status = "Up " + uptime
		if restarted[c.Service] {
			c.Status = "Up 2 seconds"
		}
		if c.Health != "" {
			c.Status += " (" + c.Health + ")"
		}
		if killed[c.Service] {
			exited[c.Service] = 137
		}
		if code, ok := exited[c.Service]; ok {
			c.State, c.Health, c.ExitCode = "exited", "", code
			c.Status = fmt.Sprintf("Exited (%d) 5 seconds ago", code)
		} else if restarting[c.Service] {
			c.State, c.Health, c.ExitCode = "restarting", "", 1
			c.Status = "Restarting (1) 2 seconds ago"
		}
		if c.State == "exited" && !all {
			continue // compose ps without --all: running containers only
		}
		out = append(out, c)
	}
	if _, ok := knob("ps-array"); ok {
		if out == nil {
			out = []container{}
		}
		b, _ := json.Marshal(out)
		fmt.Println(string(b))
		return 0
	}
	for _, c := range out {
		b, _ := json.Marshal(c)
		fmt.Println(string(b))
	}
	return 0
}

// knobSet is a knob's non-empty lines.
func knobSet(name string) map[string]bool {
	set := map[string]bool{}
	s, _ := knob(name)
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			set[l] = true
		}
	}
	return set
}

func down(project string, args []string) int {
	cs := load(project)
	for _, c := range cs {
		fmt.Fprintf(os.Stderr, " Container %s  Removed\n", c.Name)
	}
	if err := os.Remove(projectPath(project)); err != nil && !os.IsNotExist(err) {
		return fail("fakedocker: %v", err)
	}
	for _, a := range args {
		if a == "-v" || a == "--volumes" {
			f, err := os.OpenFile(filepath.Join(stateDir(), "volumes-removed"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return fail("fakedocker: %v", err)
			}
			fmt.Fprintln(f, project)
			f.Close()
		}
	}
	return 0
}

func logs(project string) int {
	extra, hasExtra := knob("log-line")
	for _, c := range load(project) {
		fmt.Printf("%s  | starting %s\n", c.Name, c.Service)
		fmt.Printf("%s  | listening\n", c.Name)
		if hasExtra {
			// compose prefixes every line a service prints with its name
			for _, l := range strings.Split(strings.TrimRight(extra, "\n"), "\n") {
				fmt.Printf("%s  | %s\n", c.Name, l)
			}
		}
	}
	return 0
}

// imageRm removes refs from the images knob, as `docker image rm` removes local images.
func imageRm(refs []string) int {
	s, _ := knob("images")
	have := map[string]bool{}
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			have[l] = true
		}
	}
	gone := map[string]bool{}
	rc := 0
	for _, r := range refs {
		if !have[r] {
			fmt.Fprintf(os.Stderr, "Error response from daemon: No such image: %s\n", r)
			rc = 1
			continue
		}
		gone[r] = true
		fmt.Printf("Untagged: %s\n", r)
	}
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !gone[l] {
			keep = append(keep, l+"\n")
		}
	}
	if err := os.WriteFile(filepath.Join(stateDir(), "images"), []byte(strings.Join(keep, "")), 0o600); err != nil {
		return fail("fakedocker: %v", err)
	}
	return rc
}
