package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const minimal = "env_id: env-qa-02\nsite: cbs\n"

func parse(t *testing.T, y string) *Config {
	t.Helper()
	c, err := Parse([]byte(y), "/etc/x.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestParseDefaultsAndDerivations(t *testing.T) {
	c := parse(t, minimal)
	want := &Config{
		EnvID: "env-qa-02", Site: "cbs", Transport: DefaultTransport(),
		Identity: "/opt/openziti/etc/identities/monky-host.env-qa-02.json",
		Tenancy: Tenancy{Service: "monky.tenancy.deploy", Host: "monky.tenancy.deploy", Port: 443,
			Scheme: "http", ProxyAddr: "127.0.0.1:18443", TimeoutS: 30},
		Bao: Bao{Service: "openbao", Addr: "https://bao.cbs.tikali.net:8200", AuthMount: "jwt-tenancy",
			Role: "see-env", KVMount: "monky", CAFile: "/etc/monky-deployd/openbao-ca.pem",
			ProxyAddr: "127.0.0.1:18200", RenewBelow: 21600, TimeoutS: 30},
		IntervalS: 60, VolumesOnAbsent: "keep", StuckAfterS: 1800, StaleAfterS: 300,
		Disk:     Disk{Factor: 1.5, HeadroomBytes: 2147483648},
		StateDir: "/var/lib/monky-deployd", DeployDir: "/var/lib/monky-deployd/env-qa-02",
		ComposeProject: "monky-env-qa-02", BootstrapPath: "/etc/monky-deployd/bootstrap.jwt",
		HealthyTimeoutS: 300, MinHealthyS: 10, HealBudget: 3, TickTimeoutS: 600, DockerBin: "docker", RegistryHost: "harbor.tikali.net",
		MaxBundleBytes: 67108864, KeepReleases: 3, LogLevel: "INFO",
		Path: "/etc/x.yaml",
	}
	sum := sha256.Sum256([]byte(minimal))
	want.Hash = hex.EncodeToString(sum[:])
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
	if got := c.TenancyBaseURL(); got != "http://monky.tenancy.deploy:443" {
		t.Errorf("TenancyBaseURL = %q", got)
	}
	if h, p := c.BaoHostPort(); h != "bao.cbs.tikali.net" || p != 8200 {
		t.Errorf("BaoHostPort = %q %d", h, p)
	}
	if c.IsProd() || c.TokenPath() != "/var/lib/monky-deployd/bao.token" {
		t.Errorf("IsProd %v TokenPath %q", c.IsProd(), c.TokenPath())
	}
	if c.TenancyTimeout().Seconds() != 30 {
		t.Errorf("TenancyTimeout %v", c.TenancyTimeout())
	}
}

func TestParseDerivationsFollowStateDirAndOverrides(t *testing.T) {
	c := parse(t, minimal+"state_dir: /srv/monky/\nlog_level: debug\nbao:\n  addr: http://127.0.0.1\n")
	if c.StateDir != "/srv/monky" || c.DeployDir != "/srv/monky/env-qa-02" || c.StatePath() != "/srv/monky/state.db" {
		t.Errorf("state_dir %q deploy_dir %q", c.StateDir, c.DeployDir)
	}
	if c.LogLevel != "DEBUG" {
		t.Errorf("log_level %q, want normalised DEBUG", c.LogLevel)
	}
	if h, p := c.BaoHostPort(); h != "127.0.0.1" || p != 80 {
		t.Errorf("BaoHostPort %q %d, want the http default port", h, p)
	}
	c = parse(t, minimal+"deploy_dir: /opt/app\ncompose_project: shop_1\ntenancy:\n  host: \"\"\n  service: t.svc\n")
	if c.DeployDir != "/opt/app" || c.ComposeProject != "shop_1" || c.Tenancy.Host != "t.svc" {
		t.Errorf("overrides: %q %q %q", c.DeployDir, c.ComposeProject, c.Tenancy.Host)
	}
}

func TestParseBaseURLAlias(t *testing.T) {
	cases := []struct {
		name, tenancy string
		want          string // TenancyBaseURL
		err           string
	}{
		{"explicit port", "  base_url: http://monky.tenancy.deploy:443\n", "http://monky.tenancy.deploy:443", ""},
		{"https default port", "  base_url: https://t.example\n", "https://t.example:443", ""},
		{"http default port", "  base_url: http://t.example/\n", "http://t.example:80", ""},
		{"agrees with explicit", "  base_url: http://t.example:8443\n  port: 8443\n  host: t.example\n", "http://t.example:8443", ""},
		{"port conflict", "  port: 8081\n  base_url: http://monky.tenancy.deploy:443\n", "",
			`config /etc/x.yaml: line 5: tenancy.base_url "http://monky.tenancy.deploy:443" conflicts with tenancy.port 8081 (line 4)`},
		{"host conflict", "  base_url: http://a.example\n  host: b.example\n", "", "conflicts with tenancy.host b.example"},
		{"scheme conflict", "  base_url: https://a.example\n  scheme: http\n", "", "conflicts with tenancy.scheme http"},
		{"bad scheme", "  base_url: ftp://a.example\n", "", "tenancy.base_url"},
		{"path", "  base_url: http://a.example/api\n", "", "must be a URL"},
		{"no host", "  base_url: http://\n", "", "must be a URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(minimal+"tenancy:\n"+tc.tenancy), "/etc/x.yaml")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.TenancyBaseURL(); got != tc.want {
				t.Errorf("TenancyBaseURL = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseProd(t *testing.T) {
	cases := []struct {
		y    string
		want bool
	}{
		{"env_id: env-prod-01\nsite: cbs\n", true},
		{"env_id: env-prod-01\nsite: cbs\nprod: false\n", false},
		{"env_id: env-qa-02\nsite: cbs\nprod: true\n", true},
		{"env_id: env-qa-02\nsite: cbs\n", false},
		{"env_id: env-production-01\nsite: cbs\n", false},
	}
	for _, tc := range cases {
		if got := parse(t, tc.y).IsProd(); got != tc.want {
			t.Errorf("%q: IsProd = %v, want %v", tc.y, got, tc.want)
		}
	}
}

// Every error is one line that names the key (and the line, when the key is in the file).
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, y, want string
	}{
		{"unknown top-level", minimal + "intervall_s: 5\n", `config /etc/x.yaml: line 3: unknown key "intervall_s"`},
		{"unknown nested", "env_id: env-qa-02\nsite: cbs\ntenancy:\n  service: x\n  port: 443\n\n  prot: 1\n",
			`config /etc/x.yaml: line 7: unknown key "tenancy.prot"`},
		{"unknown deep", minimal + "disk:\n  factor: 2\n  extra:\n    a: 1\n", `line 5: unknown key "disk.extra"`},
		{"did you mean", minimal + "healthy_timeot_s: 60\n", `line 3: unknown key "healthy_timeot_s" (did you mean "healthy_timeout_s"?)`},
		{"did you mean swapped", minimal + "tenancy:\n  prot: 1\n", `line 4: unknown key "tenancy.prot" (did you mean "tenancy.port"?)`},
		{"approle", minimal + "bao:\n  addr: https://b:8200\n  approle:\n    role_id: x\n",
			`config /etc/x.yaml: line 5: bao.approle: AppRole is gone (ADR-0028 amendment): the agent logs in with the deploy grant (jwt-tenancy/see-env)`},
		{"duplicate", minimal + "site: other\n", `line 3: key "site" given twice (first on line 2)`},
		{"type int", minimal + "interval_s: soon\n", `line 3: interval_s: want an integer, got "soon"`},
		{"type int quoted", minimal + "tenancy:\n  port: \"443\"\n", `line 4: tenancy.port: want an integer, got "443"`},
		{"type bool", minimal + "laptop_mode: yes\n", `line 3: laptop_mode: want true or false, got "yes"`},
		{"type prod", minimal + "prod: 1\n", `line 3: prod: want true or false`},
		{"type list", minimal + "site2: [a]\n", `unknown key "site2"`},
		{"list for string", minimal + "docker_bin: [docker]\n", `line 3: docker_bin: want a string, got a list`},
		{"scalar for map", minimal + "bao: openbao\n", `line 3: bao: want a mapping of keys`},
		{"float for int", minimal + "keep_releases: 2.5\n", `keep_releases: want an integer`},
		{"missing env_id", "site: cbs\n", `config /etc/x.yaml: env_id is required`},
		{"empty env_id", "env_id:\nsite: cbs\n", `line 1: env_id is required`},
		{"bad env_id", "env_id: qa-02\nsite: cbs\n", `line 1: env_id "qa-02" must look like env-<tier>-<nn>`},
		{"bad env_id chars", "env_id: env-qa-02/../x\nsite: cbs\n", `env_id "env-qa-02/../x" must look like`},
		{"missing site", "env_id: env-qa-02\n", `site is required`},
		{"transport", minimal + "transport: ssh\n", `line 3: transport "ssh" must be sdk, proxy or system`},
		{"volumes", minimal + "volumes_on_absent: delete\n", `volumes_on_absent "delete" must be keep or purge`},
		{"scheme", minimal + "tenancy:\n  scheme: ftp\n", `line 4: tenancy.scheme "ftp" must be http or https`},
		{"zero interval", minimal + "interval_s: 0\n", `line 3: interval_s must be a positive number, got 0`},
		{"negative timeout", minimal + "bao:\n  timeout_s: -1\n", `line 4: bao.timeout_s must be a positive number`},
		{"zero factor", minimal + "disk:\n  factor: 0\n", `disk.factor must be a positive number`},
		{"negative headroom", minimal + "disk:\n  headroom_bytes: -5\n", `disk.headroom_bytes must not be negative`},
		{"port range", minimal + "tenancy:\n  port: 70000\n", `tenancy.port 70000 is not a TCP port`},
		{"bao addr no scheme", minimal + "bao:\n  addr: bao.cbs.tikali.net:8200\n", `line 4: bao.addr "bao.cbs.tikali.net:8200" must be a URL`},
		{"bao addr ftp", minimal + "bao:\n  addr: ftp://bao\n", `bao.addr "ftp://bao" must be a URL`},
		{"bao addr no host", minimal + "bao:\n  addr: https://\n", `bao.addr`},
		{"log level", minimal + "log_level: verbose\n", `log_level "VERBOSE" must be DEBUG, INFO, WARN or ERROR`},
		{"relative state_dir", minimal + "state_dir: var/lib\n", `state_dir "var/lib" must be an absolute path`},
		{"proxy addr", minimal + "bao:\n  proxy_addr: localhost\n", `bao.proxy_addr "localhost" must be host:port`},
		{"project", minimal + "compose_project: Monky Shop\n", `compose_project "Monky Shop"`},
		{"registry scheme", minimal + "registry_host: https://harbor\n", `registry_host "https://harbor"`},
		{"not a mapping", "- a\n- b\n", `line 1: the file must be a mapping`},
		{"syntax", minimal + "tenancy:\n  port: 1\n bad\n", `config /etc/x.yaml: line`},
		{"two documents", minimal + "---\nsite: x\n", `more than one YAML document`},
		{"anchor", "env_id: &e env-qa-02\nsite: cbs\n", `line 1: YAML anchors and aliases are not allowed`},
		{"non-scalar key", minimal + "? [a, b]\n: 1\n", `a key must be a plain name`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.y), "/etc/x.yaml")
			if err == nil {
				t.Fatalf("accepted, want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q\nwant it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("error is %T, want *config.Error", err)
			}
		})
	}
}

func TestParseRefusesAliasBomb(t *testing.T) {
	y := minimal + `a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
`
	_, err := Parse([]byte(y), "/etc/x.yaml")
	if err == nil || !strings.Contains(err.Error(), "line 3: YAML anchors and aliases are not allowed") {
		t.Fatalf("err = %v", err)
	}
	// An alias alone (pointing at an anchor on a key of ours) is refused as well.
	_, err = Parse([]byte("env_id: &e env-qa-02\nsite: *e\n"), "/etc/x.yaml")
	if err == nil || !strings.Contains(err.Error(), "anchors and aliases") {
		t.Fatalf("alias: err = %v", err)
	}
}

func TestParseRefusesDeepNesting(t *testing.T) {
	var b strings.Builder
	b.WriteString(minimal + "tenancy:\n")
	for i := 1; i <= 12; i++ {
		b.WriteString(strings.Repeat("  ", i) + "k:\n")
	}
	b.WriteString(strings.Repeat("  ", 13) + "v: 1\n")
	_, err := Parse([]byte(b.String()), "/etc/x.yaml")
	if err == nil || !strings.Contains(err.Error(), "nesting deeper than 10 levels") {
		t.Fatalf("err = %v", err)
	}
	// Flow style, no keys of ours involved: the depth check runs before the key walk.
	_, err = Parse([]byte(minimal+"x: "+strings.Repeat("[", 50)+strings.Repeat("]", 50)+"\n"), "/etc/x.yaml")
	if err == nil || !strings.Contains(err.Error(), "nesting deeper than 10 levels") {
		t.Fatalf("flow: err = %v", err)
	}
}

// A mapping of more keys than any config has is refused before yaml decodes it (yaml's check
// for keys given twice is quadratic: 40,000 keys took seconds), as deep nesting is.
func TestParseRefusesHugeMappings(t *testing.T) {
	var b strings.Builder
	b.WriteString(minimal + "tenancy:\n")
	for i := 0; i <= MaxKeys; i++ {
		fmt.Fprintf(&b, "  k%d: 1\n", i)
	}
	_, errs := ParseAll([]byte(b.String()), "/etc/x.yaml")
	if len(errs) != 1 || errs[0].Error() != "config /etc/x.yaml: line 4: a mapping of more than 256 keys" {
		t.Fatalf("problems %q", errs)
	}
}

func TestParseNullValuesTakeDefaults(t *testing.T) {
	c := parse(t, minimal+"tenancy:\ninterval_s:\ndisk:\n  factor:\n")
	if c.Tenancy.Port != 443 || c.IntervalS != 60 || c.Disk.Factor != 1.5 {
		t.Errorf("null values: port %d interval %d factor %g", c.Tenancy.Port, c.IntervalS, c.Disk.Factor)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != p || len(c.Hash) != 64 {
		t.Errorf("Path %q Hash %q", c.Path, c.Hash)
	}
	if err := os.WriteFile(p, []byte(minimal+"# changed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c2, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Hash == c.Hash {
		t.Error("a changed file kept its hash")
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte(minimal+"#"+strings.Repeat("x", MaxFileBytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("big file: %v", err)
	}
}

// The shipped example documents the defaults: parsing it gives exactly what an empty config gives,
// but for metrics_path, which it turns on at the package's textfile directory.
func TestExampleMatchesDefaults(t *testing.T) {
	data, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := Parse(data, "config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	def := parse(t, "env_id: "+ex.EnvID+"\nsite: "+ex.Site+"\n")
	if def.MetricsPath != "" || ex.MetricsPath != "/var/lib/prometheus/node-exporter/monky_deployd.prom" {
		t.Errorf("metrics_path: default %q (want off), example %q (want the package's textfile directory)", def.MetricsPath, ex.MetricsPath)
	}
	ex.MetricsPath = ""
	ex.Hash, def.Hash, ex.Path, def.Path = "", "", "", ""
	if !reflect.DeepEqual(ex, def) {
		t.Errorf("config.example.yaml differs from the defaults:\n example %+v\ndefaults %+v", ex, def)
	}
	// Every key of the struct appears in the example (commented-out ones count).
	for _, key := range allKeys(reflect.TypeOf(Config{}), "") {
		leaf := key[strings.LastIndex(key, ".")+1:]
		if !strings.Contains(string(data), leaf+":") {
			t.Errorf("config.example.yaml does not mention %s", key)
		}
	}
}

func allKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		if t.Field(i).Type.Kind() == reflect.Struct {
			out = append(out, allKeys(t.Field(i).Type, prefix+tag+".")...)
			continue
		}
		out = append(out, prefix+tag)
	}
	return out
}

func TestLoadNamesAMissingFileAndWhatWritesIt(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "no such file") || strings.Count(err.Error(), p) != 1 {
		t.Fatalf("err = %v", err)
	}
}

// TestParseAllReportsEveryProblem: each key's problem is reported, in the file's order, with
// its line and key and the words Parse uses for it alone; a value of the wrong type is one
// problem (not also the "must be positive" of its zero value), a bad state_dir is not also a
// bad derived deploy_dir; Parse still returns the first.
func TestParseAllReportsEveryProblem(t *testing.T) {
	y := "env_id: env-qa-02\nsite: cbs\nbogus: 1\ntenancy:\n  port: abc\n  nope: 2\n" +
		"state_dir: rel\nkeep_releases: 0\nbao:\n  auth_mount: /x\n  kv_mount: a b\napprole: {}\n"
	cfg, errs := ParseAll([]byte(y), "/etc/x.yaml")
	if cfg != nil {
		t.Errorf("a config came back beside %d problems", len(errs))
	}
	want := []struct {
		line int
		key  string
		msg  string
	}{
		{3, "bogus", `unknown key "bogus"`},
		{5, "tenancy.port", `tenancy.port: want an integer, got "abc"`},
		{6, "tenancy.nope", `unknown key "tenancy.nope"`},
		{7, "state_dir", `state_dir "rel" must be an absolute path`},
		{8, "keep_releases", "keep_releases must be a positive number, got 0"},
		{10, "bao.auth_mount", `bao.auth_mount "/x" must be a plain OpenBao path segment`},
		{11, "bao.kv_mount", `bao.kv_mount "a b" must be a plain OpenBao path segment`},
		{12, "approle", "approle: AppRole is gone"},
	}
	if len(errs) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(errs), len(want), errs)
	}
	for i, w := range want {
		e := errs[i]
		if e.Line != w.line || e.Key != w.key || !strings.Contains(e.Error(), fmt.Sprintf("config /etc/x.yaml: line %d: %s", w.line, w.msg)) {
			t.Errorf("problem %d: %q (line %d, key %q), want line %d key %q %q", i, e.Error(), e.Line, e.Key, w.line, w.key, w.msg)
		}
	}
	if _, err := Parse([]byte(y), "/etc/x.yaml"); err == nil || err.Error() != errs[0].Error() {
		t.Errorf("Parse: %v, want the first problem %v", err, errs[0])
	}
	// a file-level problem is the only one
	if _, errs := ParseAll([]byte("a: &x 1\nb: *x\nbogus: 2\n"), "/etc/x.yaml"); len(errs) != 1 || !strings.Contains(errs[0].Error(), "anchors") {
		t.Errorf("anchors: %v", errs)
	}
	// a missing required key has no line
	if _, errs := ParseAll([]byte("site: cbs\nlog_level: x\n"), "/etc/x.yaml"); len(errs) != 2 || errs[0].Line != 0 || errs[0].Key != "env_id" || errs[1].Line != 2 {
		t.Errorf("no env_id and a bad log_level: %v", errs)
	}
}

// yaml decodes some scalars more leniently than a config may be written: each is refused
// with the key's words, as any other value of the wrong type.
func TestParseRefusesWhatYAMLWouldLetThrough(t *testing.T) {
	cases := []struct{ name, y, want string }{
		{"YAML 1.1 yes", "laptop_mode: yes\n", `line 3: laptop_mode: want true or false, got "yes"`},
		{"YAML 1.1 on", "prod: on\n", `line 3: prod: want true or false, got "on"`},
		{"float for int", "keep_releases: 2.0\n", `line 3: keep_releases: want an integer, got "2.0"`},
		{"nan", "disk:\n  factor: .nan\n", `line 4: disk.factor: want a number, got ".nan"`},
		{"inf", "disk:\n  factor: .inf\n", `line 4: disk.factor: want a number, got ".inf"`},
		{"binary", "docker_bin: !!binary ZG9ja2Vy\n", `line 3: docker_bin: want a string, got "ZG9ja2Vy"`},
		{"list on the next line", "docker_bin:\n  - docker\n", `line 3: docker_bin: want a string, got a list`},
		{"merge key", "tenancy:\n  <<: {port: 1}\n", `line 4: YAML merge keys (<<) are not allowed`},
		{"null key", "~: 1\n", `line 3: a key must be a plain name`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := ParseAll([]byte(minimal+tc.y), "/etc/x.yaml")
			if len(errs) != 1 || errs[0].Error() != "config /etc/x.yaml: "+tc.want {
				t.Fatalf("problems %q, want the one %q", errs, tc.want)
			}
		})
	}
}

// Every unknown key is reported, at every depth, in the file's order, each once: a key inside
// an unknown key is not looked at, and a known key that has an unknown key of its own name
// (tenancy: {tenancy: …}) is not taken for it.
func TestParseAllReportsUnknownKeysInTheFilesOrder(t *testing.T) {
	y := "zeta: 1\nenv_id: env-qa-02\nbao:\n  zz: [1]\n  kv_mount: monky\n  yy:\n    deeper: 1\nalpha: {alpha: 1}\n" +
		"tenancy: {tenancy: 1, port: x, nope: 2}\nsite: cbs\ndisk:\n  .5: 1\nmid: 2\n"
	_, errs := ParseAll([]byte(y), "/etc/x.yaml")
	want := []string{
		`line 1: unknown key "zeta"`,
		`line 4: unknown key "bao.zz"`,
		`line 6: unknown key "bao.yy"`,
		`line 8: unknown key "alpha"`,
		`line 9: unknown key "tenancy.tenancy"`,
		`line 9: tenancy.port: want an integer, got "x"`,
		`line 9: unknown key "tenancy.nope"`,
		`line 12: unknown key "disk..5"`,
		`line 13: unknown key "mid"`,
	}
	var got []string
	for _, e := range errs {
		got = append(got, strings.TrimPrefix(e.Error(), "config /etc/x.yaml: "))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A key given twice is a problem of the file's shape: every one is reported, in the file's
// order, and nothing else, for which of the two values counts is not for the agent to guess.
func TestParseAllReportsEveryKeyGivenTwice(t *testing.T) {
	y := "env_id: env-qa-02\nsite: cbs\ntenancy:\n  port: 1\n  port: 2\nbogus: 1\nsite: x\n"
	_, errs := ParseAll([]byte(y), "/etc/x.yaml")
	if len(errs) != 2 || errs[0].Line != 5 || errs[0].Key != "tenancy.port" || errs[1].Line != 7 || errs[1].Key != "site" ||
		!strings.Contains(errs[0].Error(), `key "tenancy.port" given twice (first on line 4)`) {
		t.Fatalf("problems %q", errs)
	}
}

// A did-you-mean is offered only for the one key of the same mapping a single edit away: not
// for a key of another mapping, not for a miss two edits away.
func TestDidYouMeanOnlyOneEditInItsMapping(t *testing.T) {
	for _, y := range []string{
		minimal + "bao:\n  interval_s: 1\n", // a top-level key, written under bao
		minimal + "healthy_tmeot_s: 60\n",   // two edits away
		minimal + "tenancy:\n  healthy_timeout_s: 1\n",
	} {
		_, err := Parse([]byte(y), "/etc/x.yaml")
		if err == nil || !strings.Contains(err.Error(), "unknown key") || strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%q: %v", y, err)
		}
	}
}
