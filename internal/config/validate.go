package config

import (
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
)

// finish fills defaults, applies tenancy.base_url, derives env-specific values and validates,
// part by part; a part may use what an earlier one derived (env_id, state_dir).
func (p *parser) finish(c *Config) {
	p.identity(c)
	p.tenancy(&c.Tenancy)
	p.bao(&c.Bao)
	p.loop(c)
	p.paths(c)
	p.rest(c)
}

// orDefault sets a blank string to def.
func orDefault(v *string, def string) {
	if strings.TrimSpace(*v) == "" {
		*v = def
	}
}

// num: a number absent from the file takes its default; one present must be positive.
func (p *parser) num(key string, v *int, def int) {
	if !p.has(key) {
		*v = def
		return
	}
	if *v <= 0 {
		p.report(p.errf(key, "%s must be a positive number, got %d", key, *v))
	}
}

// atLeastZero is num for a count that may be 0.
func (p *parser) atLeastZero(key string, v *int, def int) {
	if !p.has(key) {
		*v = def
		return
	}
	if *v < 0 {
		p.report(p.errf(key, "%s must not be negative, got %d", key, *v))
	}
}

// num64 is num for an int64 that must be at least min (0 or 1).
func (p *parser) num64(key string, v *int64, def int64, min int64) {
	if !p.has(key) {
		*v = def
		return
	}
	switch {
	case *v >= min:
	case min == 0:
		p.report(p.errf(key, "%s must not be negative, got %d", key, *v))
	default:
		p.report(p.errf(key, "%s must be a positive number, got %d", key, *v))
	}
}

// identity is the box's: env_id and site, required; the transport and its identity file.
func (p *parser) identity(c *Config) {
	c.EnvID = strings.TrimSpace(c.EnvID)
	if c.EnvID == "" {
		p.report(p.errf("env_id", "env_id is required (env-<tier>-<nn>, e.g. env-qa-02)"))
	}
	if !envIDRe.MatchString(c.EnvID) {
		p.report(p.errf("env_id", "env_id %q must look like env-<tier>-<nn> (e.g. env-qa-02)", c.EnvID))
	}
	c.Site = strings.TrimSpace(c.Site)
	if c.Site == "" {
		p.report(p.errf("site", "site is required (e.g. cbs)"))
	}
	if strings.ContainsFunc(c.Site, func(r rune) bool { return r <= ' ' || r == '/' || r == 0x7f }) {
		p.report(p.errf("site", "site %q must be one word", c.Site))
	}
	orDefault(&c.Transport, DefaultTransport())
	switch c.Transport {
	case TransportSDK, TransportProxy, TransportSystem:
	default:
		p.report(p.errf("transport", "transport %q must be sdk, proxy or system", c.Transport))
	}
	orDefault(&c.Identity, DefaultIdentityDir+"/monky-host."+c.EnvID+".json")
}

// tenancy is the tenancy entrypoint: base_url or scheme, host and port, and how it is reached.
func (p *parser) tenancy(t *Tenancy) {
	orDefault(&t.Service, DefaultTenancyService)
	t.Scheme = strings.ToLower(strings.TrimSpace(t.Scheme))
	p.report(p.baseURL(t))
	orDefault(&t.Host, t.Service)
	orDefault(&t.Scheme, DefaultTenancyScheme)
	if t.Scheme != "http" && t.Scheme != "https" {
		p.report(p.errf("tenancy.scheme", "tenancy.scheme %q must be http or https", t.Scheme))
	}
	p.num("tenancy.port", &t.Port, DefaultTenancyPort)
	if t.Port > 65535 {
		p.report(p.errf("tenancy.port", "tenancy.port %d is not a TCP port", t.Port))
	}
	if strings.ContainsAny(t.Host, " /:@?#") {
		p.report(p.errf("tenancy.host", "tenancy.host %q must be a bare host name", t.Host))
	}
	orDefault(&t.ProxyAddr, DefaultTenancyProxyAddr)
	p.report(p.hostPort("tenancy.proxy_addr", t.ProxyAddr))
	p.num("tenancy.timeout_s", &t.TimeoutS, DefaultTimeoutS)
}

// bao is OpenBao: its address, the login and KV mounts, and how it is reached.
func (p *parser) bao(b *Bao) {
	orDefault(&b.Service, DefaultBaoService)
	orDefault(&b.Addr, DefaultBaoAddr)
	if u, err := url.Parse(b.Addr); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
		p.report(p.errf("bao.addr", "bao.addr %q must be a URL like https://bao.example:8200", b.Addr))
	} else if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			p.report(p.errf("bao.addr", "bao.addr %q has a bad port", b.Addr))
		}
	}
	orDefault(&b.AuthMount, DefaultBaoAuthMount)
	orDefault(&b.Role, DefaultBaoRole)
	orDefault(&b.KVMount, DefaultBaoKVMount)
	for _, kv := range [][2]string{{"bao.auth_mount", b.AuthMount}, {"bao.role", b.Role}, {"bao.kv_mount", b.KVMount}} {
		if key, v := kv[0], kv[1]; strings.ContainsAny(v, " ?#%") || strings.HasPrefix(v, "/") || strings.Contains(v, "..") {
			p.report(p.errf(key, "%s %q must be a plain OpenBao path segment", key, v))
		}
	}
	orDefault(&b.CAFile, DefaultBaoCAFile)
	orDefault(&b.ProxyAddr, DefaultBaoProxyAddr)
	p.report(p.hostPort("bao.proxy_addr", b.ProxyAddr))
	p.num("bao.renew_below_s", &b.RenewBelow, DefaultRenewBelowS)
	p.num("bao.timeout_s", &b.TimeoutS, DefaultTimeoutS)
}

// loop is the loop's and the apply's: the interval, the verdict's limits (when working on it
// turns into needs a person), volumes and the disk rule.
func (p *parser) loop(c *Config) {
	p.num("interval_s", &c.IntervalS, DefaultIntervalS)
	p.num("stuck_after_s", &c.StuckAfterS, DefaultStuckAfterS)
	p.num("stale_after_s", &c.StaleAfterS, DefaultStaleAfterS)
	orDefault(&c.VolumesOnAbsent, DefaultVolumesOnAbsent)
	if c.VolumesOnAbsent != "keep" && c.VolumesOnAbsent != "purge" {
		p.report(p.errf("volumes_on_absent", "volumes_on_absent %q must be keep or purge", c.VolumesOnAbsent))
	}
	if !p.has("disk.factor") {
		c.Disk.Factor = DefaultDiskFactor
	} else if c.Disk.Factor <= 0 {
		p.report(p.errf("disk.factor", "disk.factor must be a positive number, got %g", c.Disk.Factor))
	}
	p.num64("disk.headroom_bytes", &c.Disk.HeadroomBytes, DefaultHeadroomBytes, 0)
}

// paths are the state and deploy directories and the compose project, derived from env_id.
func (p *parser) paths(c *Config) {
	orDefault(&c.StateDir, DefaultStateDir)
	p.report(p.absPath("state_dir", &c.StateDir))
	orDefault(&c.DeployDir, c.StateDir+"/"+c.EnvID)
	if p.has("deploy_dir") || !p.bad["state_dir"] { // derived from a bad state_dir: that one problem
		p.report(p.absPath("deploy_dir", &c.DeployDir))
	}
	orDefault(&c.ComposeProject, "monky-"+c.EnvID)
	if (p.has("compose_project") || !p.bad["env_id"]) && !projectRe.MatchString(c.ComposeProject) { // derived from a bad env_id: that one problem
		p.report(p.errf("compose_project", "compose_project %q must be lower-case letters, digits, - and _", c.ComposeProject))
	}
	orDefault(&c.BootstrapPath, DefaultBootstrapPath)
}

// rest is the timeouts, docker, the registry, the bundle and release limits, logs and metrics.
func (p *parser) rest(c *Config) {
	p.num("healthy_timeout_s", &c.HealthyTimeoutS, DefaultHealthyTimeoutS)
	p.atLeastZero("min_healthy_s", &c.MinHealthyS, min(DefaultMinHealthyS, max(c.HealthyTimeoutS, 0)))
	if c.MinHealthyS > c.HealthyTimeoutS && c.HealthyTimeoutS > 0 {
		p.report(p.errf("min_healthy_s", "min_healthy_s (%d) must be at most healthy_timeout_s (%d): the gate could never pass", c.MinHealthyS, c.HealthyTimeoutS))
	}
	p.atLeastZero("heal_budget", &c.HealBudget, DefaultHealBudget)
	p.num("tick_timeout_s", &c.TickTimeoutS, DefaultTickTimeoutS)
	orDefault(&c.DockerBin, DefaultDockerBin)
	orDefault(&c.RegistryHost, DefaultRegistryHost)
	if strings.Contains(c.RegistryHost, "://") || strings.ContainsAny(c.RegistryHost, " /") {
		p.report(p.errf("registry_host", "registry_host %q must be a host name (optionally :port), no scheme or path", c.RegistryHost))
	}
	p.num64("max_bundle_bytes", &c.MaxBundleBytes, DefaultMaxBundleBytes, 1)
	p.num("keep_releases", &c.KeepReleases, DefaultKeepReleases)
	orDefault(&c.LogLevel, DefaultLogLevel)
	c.LogLevel = strings.ToUpper(strings.TrimSpace(c.LogLevel))
	switch c.LogLevel {
	case "DEBUG", "INFO", "WARN", "ERROR":
	default:
		p.report(p.errf("log_level", "log_level %q must be DEBUG, INFO, WARN or ERROR", c.LogLevel))
	}
	c.MetricsPath = strings.TrimSpace(c.MetricsPath)
}

// baseURL applies tenancy.base_url to scheme/host/port, refusing a value that contradicts one
// given explicitly.
func (p *parser) baseURL(t *Tenancy) *Error {
	raw := strings.TrimSpace(t.BaseURL)
	if raw == "" {
		return nil
	}
	const key = "tenancy.base_url"
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		(u.Path != "" && u.Path != "/") {
		return p.errf(key, "%s %q must be a URL like http://monky.tenancy.deploy:443", key, raw)
	}
	scheme := strings.ToLower(u.Scheme)
	port := 80
	switch scheme {
	case "http":
	case "https":
		port = 443
	default:
		return p.errf(key, "%s %q must use http or https", key, raw)
	}
	if s := u.Port(); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 65535 {
			return p.errf(key, "%s %q has a bad port", key, raw)
		}
		port = n
	}
	if e := p.baseURLConflict(t, raw, scheme, u.Hostname(), port); e != nil {
		return e
	}
	t.Scheme, t.Host, t.Port = scheme, u.Hostname(), port
	p.given["tenancy.port"] = true // from base_url, not the default
	return nil
}

// baseURLConflict refuses a base_url whose scheme, host or port contradicts one given in the file.
func (p *parser) baseURLConflict(t *Tenancy, raw, scheme, host string, port int) *Error {
	conflict := func(other string, v any) *Error {
		return p.errf("tenancy.base_url", "tenancy.base_url %q conflicts with %s %v (line %d): give one or the other", raw, other, v, p.keys[other].line)
	}
	switch {
	case p.has("tenancy.scheme") && t.Scheme != "" && t.Scheme != scheme:
		return conflict("tenancy.scheme", t.Scheme)
	case p.has("tenancy.host") && t.Host != "" && t.Host != host:
		return conflict("tenancy.host", t.Host)
	case p.has("tenancy.port") && t.Port != 0 && t.Port != port:
		return conflict("tenancy.port", t.Port)
	}
	return nil
}

func (p *parser) hostPort(key, v string) *Error {
	h, port, err := net.SplitHostPort(v)
	n, perr := strconv.Atoi(port)
	if err != nil || h == "" || perr != nil || n < 1 || n > 65535 {
		return p.errf(key, "%s %q must be host:port", key, v)
	}
	return nil
}

func (p *parser) absPath(key string, v *string) *Error {
	if !filepath.IsAbs(*v) {
		return p.errf(key, "%s %q must be an absolute path", key, *v)
	}
	*v = filepath.Clean(*v)
	return nil
}
