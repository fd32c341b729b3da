package config

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
)

// Limits on the file itself: a config is a few hundred bytes, never megabytes or a tower of maps.
const (
	MaxFileBytes = 1 << 20 // Load refuses a bigger file
	MaxDepth     = 10      // mappings/sequences nested deeper than this are refused
	MaxKeys      = 256     // a mapping with more keys than this is refused (yaml's decoding is quadratic in them)
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
	DefaultMinHealthyS      = 10
	DefaultHealBudget       = 3
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
// the file has several problems it is the first ParseAll reports.
func Parse(data []byte, path string) (*Config, error) {
	cfg, errs := ParseAll(data, path)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return cfg, nil
}

// ParseAll is Parse reporting every problem rather than the first: each key's first problem,
// in the file's order (a problem with no line, a required key that is missing, first). A file
// that is not YAML, holds more than one document, anchors, aliases, merge keys or deep nesting,
// gives a key twice or a key that is not a plain name, or is not a mapping, is reported for
// that alone: nothing else is looked at. The Config is nil when any problem is found.
func ParseAll(data []byte, path string) (*Config, []*Error) {
	p := &parser{path: path, keys: map[string]*entry{}, given: map[string]bool{}, bad: map[string]bool{}}
	root, errs := p.document(data)
	if len(errs) > 0 {
		return nil, errs
	}
	cfg := &Config{}
	if root != nil {
		p.index(root, "")
		p.decode(data, cfg)
	}
	p.finish(cfg)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
		return nil, p.errs
	}
	sum := sha256.Sum256(data)
	cfg.Hash = hex.EncodeToString(sum[:])
	cfg.Path = path
	return cfg, nil
}

// parser is one ParseAll: where each key of the file is, and the problems found.
type parser struct {
	path  string
	keys  map[string]*entry // dotted key → where it is in the file
	order []*entry          // every key of the file, in the file's order
	given map[string]bool   // keys present with a non-empty value; an empty value means the default
	bad   map[string]bool   // keys with a problem reported: one problem per key
	errs  []*Error          // every problem found
}

// report keeps err (nil is nothing) unless its key has a problem already: a value of the
// wrong type is one problem, not also the "must be positive" of its zero value.
func (p *parser) report(e *Error) {
	if e == nil {
		return
	}
	if e.Key != "" {
		if p.bad[e.Key] {
			return
		}
		p.bad[e.Key] = true
	}
	p.errs = append(p.errs, e)
}

// errf is a problem of key, on the key's line (0 when the key is not in the file).
func (p *parser) errf(key string, format string, args ...any) *Error {
	line := 0
	if e := p.keys[key]; e != nil {
		line = e.line
	}
	return &Error{Path: p.path, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) has(key string) bool { return p.given[key] }

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
