package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Limits on the file itself: a config is a few hundred bytes, never megabytes or a tower of maps.
const (
	MaxFileBytes = 1 << 20 // Load refuses a bigger file
	MaxDepth     = 10      // mappings/sequences nested deeper than this are refused
)

// Defaults, as config.example.yaml shows them. Values derived from env_id are filled in by Parse.
const (
	DefaultTenancyService   = "monky.tenancy.deploy"
	DefaultTenancyPort      = 443
	DefaultTenancyScheme    = "http"
	DefaultTenancyProxyAddr = "127.0.0.1:18443"
	DefaultTimeoutS         = 30
	DefaultBaoService       = "openbao"
	DefaultBaoAddr          = "https://bao.cbs.tikali.net:8200"
	DefaultBaoAuthMount     = "jwt-tenancy"
	DefaultBaoRole          = "see-env"
	DefaultBaoKVMount       = "monky"
	DefaultBaoCAFile        = "/etc/monky-deployd/openbao-ca.pem"
	DefaultBaoProxyAddr     = "127.0.0.1:18200"
	DefaultRenewBelowS      = 21600
	DefaultIntervalS        = 60
	DefaultStuckAfterS      = 1800
	DefaultStaleAfterS      = 300
	DefaultVolumesOnAbsent  = "keep"
	DefaultDiskFactor       = 1.5
	DefaultHeadroomBytes    = 2147483648
	DefaultStateDir         = "/var/lib/monky-deployd"
	DefaultIdentityDir      = "/opt/openziti/etc/identities"
	DefaultBootstrapPath    = "/etc/monky-deployd/bootstrap.jwt"
	DefaultHealthyTimeoutS  = 300
	DefaultTickTimeoutS     = 600
	DefaultDockerBin        = "docker"
	DefaultRegistryHost     = "harbor.tikali.net"
	DefaultMaxBundleBytes   = 67108864
	DefaultKeepReleases     = 3
	DefaultLogLevel         = "INFO"
)

// approleMsg is the whole answer to a config that still carries the pre-amendment AppRole block.
const approleMsg = "AppRole is gone (ADR-0028 amendment): the agent logs in with the deploy grant (jwt-tenancy/see-env); remove this key"

// Error is a configuration error: the file, the line when one is known, and what is wrong
// (naming the key). Its text is the one line the CLI prints before exiting 1.
type Error struct {
	Path string // the config file
	Line int    // 1-based; 0 when the problem has no single line (a missing key)
	Key  string // dotted key, e.g. "tenancy.port"; "" for a file-level problem
	Msg  string // what is wrong, naming the key
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("config %s: line %d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("config %s: %s", e.Path, e.Msg)
}

var (
	envIDRe   = regexp.MustCompile(`^env-[a-z][a-z0-9]*-[0-9]{2,}$`)
	projectRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
)

// Load reads the config file at path (at most MaxFileBytes) and parses it with Parse.
func Load(path string) (*Config, error) {
	data, err := read(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// LoadAll reads the config file at path like Load and reports every problem it finds (see
// ParseAll), not only the first: what `monky-deployd check config` prints, one line each.
func LoadAll(path string) (*Config, []error) {
	data, err := read(path)
	if err != nil {
		return nil, []error{err}
	}
	cfg, errs := ParseAll(data, path)
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return cfg, out
}

// read returns the config file's bytes, at most MaxFileBytes.
func read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("config %s: no such file (install.sh writes it; --config or MONKY_DEPLOYD_CONFIG name another)", path)
		case errors.Is(err, fs.ErrPermission):
			return nil, fmt.Errorf("config %s: not readable by this user (uid %d): it is 0640 root:monky-deployd", path, os.Geteuid())
		}
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config %s: read: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, &Error{Path: path, Msg: fmt.Sprintf("file is larger than %d bytes", MaxFileBytes)}
	}
	return data, nil
}

// Parse reads config.yaml's bytes strictly, fills every default, derives the env-specific paths
// and validates the result. path is only used to name the file in errors and is kept in
// Config.Path; Config.Hash is the sha256 of data. Every error is a *Error naming the key; when
// the file has several problems it is the first ParseAll finds.
func Parse(data []byte, path string) (*Config, error) {
	cfg, errs := ParseAll(data, path)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return cfg, nil
}

// ParseAll is Parse reporting every problem rather than the first: each key's first problem,
// in the order Parse meets them (the file's keys in order, then the values' checks). A file
// that is not YAML, holds more than one document, anchors, aliases or deep nesting, or is not a
// mapping is one problem and nothing else is looked at. The Config is nil when any is found.
func ParseAll(data []byte, path string) (*Config, []*Error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, []*Error{{Path: path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, []*Error{{Path: path, Line: extra.Line, Msg: "more than one YAML document"}}
	} else if !errors.Is(err, io.EOF) {
		return nil, []*Error{{Path: path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}}
	}

	w := &walker{path: path, lines: map[string]int{}, given: map[string]bool{}, bad: map[string]bool{}}
	cfg := &Config{}
	if len(doc.Content) > 0 {
		root := doc.Content[0]
		if err := w.shape(root, 1); err != nil {
			return nil, []*Error{err}
		}
		switch {
		case root.Kind == yaml.MappingNode:
			w.mapping(root, reflect.ValueOf(cfg).Elem(), "")
		case isNull(root):
		default:
			return nil, []*Error{{Path: path, Line: root.Line, Msg: "the file must be a mapping of keys to values"}}
		}
	}
	w.finish(cfg)
	if len(w.errs) > 0 {
		return nil, w.errs
	}
	sum := sha256.Sum256(data)
	cfg.Hash = hex.EncodeToString(sum[:])
	cfg.Path = path
	return cfg, nil
}

// walker decodes a yaml.Node tree into Config by its yaml tags, remembering where each key was.
type walker struct {
	path  string
	lines map[string]int  // dotted key → line, for every key present in the file
	given map[string]bool // keys present with a non-empty value; an empty value means the default
	bad   map[string]bool // keys with a problem reported: one problem per key
	errs  []*Error        // every problem found, in the order found
}

// report keeps err (a *Error; nil is nothing) unless its key has a problem already: a value
// of the wrong type is one problem, not also the "must be positive" of its zero value.
func (w *walker) report(err error) {
	var e *Error
	if !errors.As(err, &e) {
		return
	}
	if e.Key != "" {
		if w.bad[e.Key] {
			return
		}
		w.bad[e.Key] = true
	}
	w.errs = append(w.errs, e)
}

func (w *walker) errf(key string, format string, args ...any) *Error {
	return &Error{Path: w.path, Line: w.lines[key], Key: key, Msg: fmt.Sprintf(format, args...)}
}

func (w *walker) has(key string) bool { return w.given[key] }

// shape refuses anchors, aliases and deep nesting before anything is decoded.
func (w *walker) shape(n *yaml.Node, depth int) *Error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return &Error{Path: w.path, Line: n.Line, Msg: "YAML anchors and aliases are not allowed"}
	}
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		if depth > MaxDepth {
			return &Error{Path: w.path, Line: n.Line, Msg: fmt.Sprintf("nesting deeper than %d levels", MaxDepth)}
		}
		for _, c := range n.Content {
			if err := w.shape(c, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// mapping decodes n into v, reporting each key's problem and going on with the next key.
func (w *walker) mapping(n *yaml.Node, v reflect.Value, prefix string) {
	t := v.Type()
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			w.report(&Error{Path: w.path, Line: k.Line, Msg: "a key must be a plain name"})
			continue
		}
		key := prefix + k.Value
		if line, dup := w.lines[key]; dup {
			w.report(&Error{Path: w.path, Line: k.Line, Key: key,
				Msg: fmt.Sprintf("key %q given twice (first on line %d)", key, line)})
			continue
		}
		w.lines[key] = k.Line
		if k.Value == "approle" {
			w.report(w.errf(key, "%s: %s", key, approleMsg))
			continue
		}
		idx := fieldByTag(t, k.Value)
		if idx < 0 {
			w.report(w.errf(key, "unknown key %q", key))
			continue
		}
		w.report(w.value(val, v.Field(idx), key))
	}
}

func fieldByTag(t reflect.Type, name string) int {
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag != "" && tag != "-" && tag == name {
			return i
		}
	}
	return -1
}

func (w *walker) value(n *yaml.Node, f reflect.Value, key string) error {
	if isNull(n) {
		return nil // an empty value is the default
	}
	w.given[key] = true
	if f.Kind() == reflect.Struct {
		if n.Kind != yaml.MappingNode {
			return w.errf(key, "%s: want a mapping of keys", key)
		}
		w.mapping(n, f, key+".")
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return w.errf(key, "%s: want %s, got a %s", key, want(f.Type()), kindName(n.Kind))
	}
	bad := func() error {
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return w.errf(key, "%s: want %s, got %q", key, want(f.Type()), v)
	}
	switch f.Kind() {
	case reflect.String:
		switch n.Tag {
		case "!!str", "!!int", "!!float", "!!bool", "!!timestamp":
			f.SetString(n.Value)
		default:
			return bad()
		}
	case reflect.Int, reflect.Int64:
		if n.Tag != "!!int" {
			return bad()
		}
		var x int64
		if err := n.Decode(&x); err != nil || f.OverflowInt(x) {
			return bad()
		}
		f.SetInt(x)
	case reflect.Float64:
		if n.Tag != "!!int" && n.Tag != "!!float" {
			return bad()
		}
		var x float64
		if err := n.Decode(&x); err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return bad()
		}
		f.SetFloat(x)
	case reflect.Bool:
		var x bool
		if n.Tag != "!!bool" || n.Decode(&x) != nil {
			return bad()
		}
		f.SetBool(x)
	case reflect.Pointer:
		if f.Type().Elem().Kind() != reflect.Bool {
			return bad()
		}
		var x bool
		if n.Tag != "!!bool" || n.Decode(&x) != nil {
			return bad()
		}
		f.Set(reflect.ValueOf(&x))
	default:
		return bad()
	}
	return nil
}

func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool, reflect.Pointer:
		return "true or false"
	}
	return "a mapping of keys"
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	}
	return "value"
}

// finish fills defaults, applies tenancy.base_url, derives env-specific values and validates.
func (w *walker) finish(c *Config) {
	str := func(p *string, def string) {
		if strings.TrimSpace(*p) == "" {
			*p = def
		}
	}
	// A number absent from the file takes its default; one present must be positive.
	num := func(key string, p *int, def int) {
		if !w.has(key) {
			*p = def
			return
		}
		if *p <= 0 {
			w.report(w.errf(key, "%s must be a positive number, got %d", key, *p))
		}
	}
	num64 := func(key string, p *int64, def int64, min int64) {
		if !w.has(key) {
			*p = def
			return
		}
		switch {
		case *p >= min:
		case min == 0:
			w.report(w.errf(key, "%s must not be negative, got %d", key, *p))
		default:
			w.report(w.errf(key, "%s must be a positive number, got %d", key, *p))
		}
	}

	// Required identity of the box.
	c.EnvID = strings.TrimSpace(c.EnvID)
	if c.EnvID == "" {
		w.report(w.errf("env_id", "env_id is required (env-<tier>-<nn>, e.g. env-qa-02)"))
	}
	if !envIDRe.MatchString(c.EnvID) {
		w.report(w.errf("env_id", "env_id %q must look like env-<tier>-<nn> (e.g. env-qa-02)", c.EnvID))
	}
	c.Site = strings.TrimSpace(c.Site)
	if c.Site == "" {
		w.report(w.errf("site", "site is required (e.g. cbs)"))
	}
	if strings.ContainsFunc(c.Site, func(r rune) bool { return r <= ' ' || r == '/' || r == 0x7f }) {
		w.report(w.errf("site", "site %q must be one word", c.Site))
	}

	str(&c.Transport, DefaultTransport())
	switch c.Transport {
	case TransportSDK, TransportProxy, TransportSystem:
	default:
		w.report(w.errf("transport", "transport %q must be sdk, proxy or system", c.Transport))
	}
	str(&c.Identity, DefaultIdentityDir+"/monky-host."+c.EnvID+".json")

	// tenancy
	t := &c.Tenancy
	str(&t.Service, DefaultTenancyService)
	t.Scheme = strings.ToLower(strings.TrimSpace(t.Scheme))
	w.report(w.baseURL(t))
	str(&t.Host, t.Service)
	str(&t.Scheme, DefaultTenancyScheme)
	if t.Scheme != "http" && t.Scheme != "https" {
		w.report(w.errf("tenancy.scheme", "tenancy.scheme %q must be http or https", t.Scheme))
	}
	num("tenancy.port", &t.Port, DefaultTenancyPort)
	if t.Port > 65535 {
		w.report(w.errf("tenancy.port", "tenancy.port %d is not a TCP port", t.Port))
	}
	if strings.ContainsAny(t.Host, " /:@?#") {
		w.report(w.errf("tenancy.host", "tenancy.host %q must be a bare host name", t.Host))
	}
	str(&t.ProxyAddr, DefaultTenancyProxyAddr)
	w.report(w.hostPort("tenancy.proxy_addr", t.ProxyAddr))
	num("tenancy.timeout_s", &t.TimeoutS, DefaultTimeoutS)

	// bao
	b := &c.Bao
	str(&b.Service, DefaultBaoService)
	str(&b.Addr, DefaultBaoAddr)
	if u, err := url.Parse(b.Addr); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
		w.report(w.errf("bao.addr", "bao.addr %q must be a URL like https://bao.example:8200", b.Addr))
	} else if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			w.report(w.errf("bao.addr", "bao.addr %q has a bad port", b.Addr))
		}
	}
	str(&b.AuthMount, DefaultBaoAuthMount)
	str(&b.Role, DefaultBaoRole)
	str(&b.KVMount, DefaultBaoKVMount)
	for _, kv := range [][2]string{{"bao.auth_mount", b.AuthMount}, {"bao.role", b.Role}, {"bao.kv_mount", b.KVMount}} {
		if key, v := kv[0], kv[1]; strings.ContainsAny(v, " ?#%") || strings.HasPrefix(v, "/") || strings.Contains(v, "..") {
			w.report(w.errf(key, "%s %q must be a plain OpenBao path segment", key, v))
		}
	}
	str(&b.CAFile, DefaultBaoCAFile)
	str(&b.ProxyAddr, DefaultBaoProxyAddr)
	w.report(w.hostPort("bao.proxy_addr", b.ProxyAddr))
	num("bao.renew_below_s", &b.RenewBelow, DefaultRenewBelowS)
	num("bao.timeout_s", &b.TimeoutS, DefaultTimeoutS)

	// the loop and the apply
	num("interval_s", &c.IntervalS, DefaultIntervalS)
	// the verdict: when working on it turns into needs a person
	num("stuck_after_s", &c.StuckAfterS, DefaultStuckAfterS)
	num("stale_after_s", &c.StaleAfterS, DefaultStaleAfterS)
	str(&c.VolumesOnAbsent, DefaultVolumesOnAbsent)
	if c.VolumesOnAbsent != "keep" && c.VolumesOnAbsent != "purge" {
		w.report(w.errf("volumes_on_absent", "volumes_on_absent %q must be keep or purge", c.VolumesOnAbsent))
	}
	if !w.has("disk.factor") {
		c.Disk.Factor = DefaultDiskFactor
	} else if c.Disk.Factor <= 0 {
		w.report(w.errf("disk.factor", "disk.factor must be a positive number, got %g", c.Disk.Factor))
	}
	num64("disk.headroom_bytes", &c.Disk.HeadroomBytes, DefaultHeadroomBytes, 0)

	// paths
	str(&c.StateDir, DefaultStateDir)
	w.report(w.absPath("state_dir", &c.StateDir))
	str(&c.DeployDir, c.StateDir+"/"+c.EnvID)
	if w.has("deploy_dir") || !w.bad["state_dir"] { // derived from a bad state_dir: that one problem
		w.report(w.absPath("deploy_dir", &c.DeployDir))
	}
	str(&c.ComposeProject, "monky-"+c.EnvID)
	if !projectRe.MatchString(c.ComposeProject) {
		w.report(w.errf("compose_project", "compose_project %q must be lower-case letters, digits, - and _", c.ComposeProject))
	}
	str(&c.BootstrapPath, DefaultBootstrapPath)
	num("healthy_timeout_s", &c.HealthyTimeoutS, DefaultHealthyTimeoutS)
	num("tick_timeout_s", &c.TickTimeoutS, DefaultTickTimeoutS)
	str(&c.DockerBin, DefaultDockerBin)
	str(&c.RegistryHost, DefaultRegistryHost)
	if strings.Contains(c.RegistryHost, "://") || strings.ContainsAny(c.RegistryHost, " /") {
		w.report(w.errf("registry_host", "registry_host %q must be a host name (optionally :port), no scheme or path", c.RegistryHost))
	}
	num64("max_bundle_bytes", &c.MaxBundleBytes, DefaultMaxBundleBytes, 1)
	num("keep_releases", &c.KeepReleases, DefaultKeepReleases)
	str(&c.LogLevel, DefaultLogLevel)
	c.LogLevel = strings.ToUpper(strings.TrimSpace(c.LogLevel))
	switch c.LogLevel {
	case "DEBUG", "INFO", "WARN", "ERROR":
	default:
		w.report(w.errf("log_level", "log_level %q must be DEBUG, INFO, WARN or ERROR", c.LogLevel))
	}
	c.MetricsPath = strings.TrimSpace(c.MetricsPath)
}

// baseURL applies tenancy.base_url to scheme/host/port, refusing a value that contradicts one given
// explicitly.
func (w *walker) baseURL(t *Tenancy) error {
	raw := strings.TrimSpace(t.BaseURL)
	if raw == "" {
		return nil
	}
	const key = "tenancy.base_url"
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		(u.Path != "" && u.Path != "/") {
		return w.errf(key, "%s %q must be a URL like http://monky.tenancy.deploy:443", key, raw)
	}
	scheme := strings.ToLower(u.Scheme)
	port := 80
	switch scheme {
	case "http":
	case "https":
		port = 443
	default:
		return w.errf(key, "%s %q must use http or https", key, raw)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return w.errf(key, "%s %q has a bad port", key, raw)
		}
		port = n
	}
	host := u.Hostname()
	conflict := func(other string, v any) error {
		return w.errf(key, "%s %q conflicts with %s %v (line %d): give one or the other", key, raw, other, v, w.lines[other])
	}
	if w.has("tenancy.scheme") && t.Scheme != "" && t.Scheme != scheme {
		return conflict("tenancy.scheme", t.Scheme)
	}
	if w.has("tenancy.host") && t.Host != "" && t.Host != host {
		return conflict("tenancy.host", t.Host)
	}
	if w.has("tenancy.port") && t.Port != 0 && t.Port != port {
		return conflict("tenancy.port", t.Port)
	}
	t.Scheme, t.Host, t.Port = scheme, host, port
	w.given["tenancy.port"] = true // from base_url, not the default
	return nil
}

func (w *walker) hostPort(key, v string) error {
	h, p, err := net.SplitHostPort(v)
	n, perr := strconv.Atoi(p)
	if err != nil || h == "" || perr != nil || n < 1 || n > 65535 {
		return w.errf(key, "%s %q must be host:port", key, v)
	}
	return nil
}

func (w *walker) absPath(key string, p *string) error {
	if !filepath.IsAbs(*p) {
		return w.errf(key, "%s %q must be an absolute path", key, *p)
	}
	*p = filepath.Clean(*p)
	return nil
}

// TenancyBaseURL is scheme://host:port of the tenancy entrypoint, as dialled over the mesh.
func (c *Config) TenancyBaseURL() string {
	return c.Tenancy.Scheme + "://" + net.JoinHostPort(c.Tenancy.Host, strconv.Itoa(c.Tenancy.Port))
}

// BaoHostPort is the host and port of bao.addr; the port defaults by scheme (https 443, http 80).
// It returns ("", 0) for an address Parse would have refused.
func (c *Config) BaoHostPort() (host string, port int) {
	u, err := url.Parse(c.Bao.Addr)
	if err != nil || u.Hostname() == "" {
		return "", 0
	}
	port = 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return "", 0
		}
		port = n
	}
	return u.Hostname(), port
}
