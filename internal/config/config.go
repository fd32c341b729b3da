// Package config reads the agent's config.yaml strictly and derives every default.
//
// It may read the config file and nothing else: no network, no state file, no docker.
// An unknown key is an error naming the key and its line; bao.approle is refused.
package config

import "time"

// DefaultPath is where the config lives on a box; MONKY_DEPLOYD_CONFIG or --config override it.
const DefaultPath = "/etc/monky-deployd/config.yaml"

// Transports the agent knows.
const (
	TransportSDK    = "sdk"
	TransportProxy  = "proxy"
	TransportSystem = "system"
)

// Tenancy is the tenancy agent entrypoint as reached over the mesh.
type Tenancy struct {
	Service   string `yaml:"service"`
	Host      string `yaml:"host"` // intercept host; default = Service
	Port      int    `yaml:"port"` // the service's intercept port (443), never the pod's 8081
	Scheme    string `yaml:"scheme"`
	ProxyAddr string `yaml:"proxy_addr"`
	TimeoutS  int    `yaml:"timeout_s"`
	BaseURL   string `yaml:"base_url"` // accepted alias for scheme/host/port
	CAFile    string `yaml:"ca_file"`  // for scheme https; used when present
}

// Bao is OpenBao as reached over the mesh.
type Bao struct {
	Service    string `yaml:"service"`
	Addr       string `yaml:"addr"`
	AuthMount  string `yaml:"auth_mount"`
	Role       string `yaml:"role"`
	KVMount    string `yaml:"kv_mount"`
	CAFile     string `yaml:"ca_file"`
	ProxyAddr  string `yaml:"proxy_addr"`
	RenewBelow int    `yaml:"renew_below_s"`
	TimeoutS   int    `yaml:"timeout_s"`
}

// Disk is the pre-flight free-space rule: need × Factor + HeadroomBytes.
type Disk struct {
	Factor        float64 `yaml:"factor"`
	HeadroomBytes int64   `yaml:"headroom_bytes"`
}

// Config is config.yaml after defaults and derivations.
type Config struct {
	EnvID           string  `yaml:"env_id"`
	Site            string  `yaml:"site"`
	Transport       string  `yaml:"transport"`
	Identity        string  `yaml:"identity"`
	Tenancy         Tenancy `yaml:"tenancy"`
	Bao             Bao     `yaml:"bao"`
	IntervalS       int     `yaml:"interval_s"`
	LaptopMode      bool    `yaml:"laptop_mode"`
	VolumesOnAbsent string  `yaml:"volumes_on_absent"` // keep | purge
	Prod            *bool   `yaml:"prod"`              // nil: true when the env's tier is prod
	Disk            Disk    `yaml:"disk"`
	StateDir        string  `yaml:"state_dir"`
	DeployDir       string  `yaml:"deploy_dir"`
	ComposeProject  string  `yaml:"compose_project"`
	BootstrapPath   string  `yaml:"bootstrap_path"`
	HealthyTimeoutS int     `yaml:"healthy_timeout_s"`
	// MinHealthyS: the health gate passes only once every service has stayed running (healthy
	// where it has a healthcheck) with no restart this long; at most healthy_timeout_s.
	MinHealthyS int `yaml:"min_healthy_s"`
	// Heal (nil: true): a heartbeat that finds the applied release not running runs compose up
	// of it again, at most HealBudget times in a rolling hour.
	Heal           *bool  `yaml:"heal"`
	HealBudget     int    `yaml:"heal_budget"`
	TickTimeoutS   int    `yaml:"tick_timeout_s"` // one deadline for a whole tick of `run`
	DockerBin      string `yaml:"docker_bin"`
	RegistryHost   string `yaml:"registry_host"`
	MaxBundleBytes int64  `yaml:"max_bundle_bytes"`
	KeepReleases   int    `yaml:"keep_releases"`
	LogLevel       string `yaml:"log_level"`
	MetricsPath    string `yaml:"metrics_path"` // node_exporter textfile; off when empty
	// StuckAfterS: a temporary fault older than this needs a person (status exits 1).
	StuckAfterS int `yaml:"stuck_after_s"`
	// StaleAfterS: a box whose last tick is older than this needs a person (the timer stopped).
	StaleAfterS int `yaml:"stale_after_s"`

	// Path is the file this config was read from (not a YAML key).
	Path string `yaml:"-"`
	// Hash is the sha256 of the file's bytes: a changed config unblocks a Blocked machine.
	Hash string `yaml:"-"`
}

// Heals reports whether a heartbeat heals the applied release (heal, default true).
func (c *Config) Heals() bool { return c.Heal == nil || *c.Heal }

// IsProd reports whether this env is prod: the explicit key, else the tier of env_id.
func (c *Config) IsProd() bool {
	if c.Prod != nil {
		return *c.Prod
	}
	return Tier(c.EnvID) == "prod"
}

// TokenPath is the OpenBao token file, the agent's bearer (0600).
func (c *Config) TokenPath() string { return c.StateDir + "/bao.token" }

// GrantPath is where a leased deploy grant waits for its login (0600, never in bbolt).
func (c *Config) GrantPath() string { return c.StateDir + "/lease.grant" }

// StatePath is the bbolt state and journal file.
func (c *Config) StatePath() string { return c.StateDir + "/state.db" }

// LockPath is the tick lock.
func (c *Config) LockPath() string { return c.StateDir + "/lock" }

// DockerConfigDir is the agent's own DOCKER_CONFIG, never a human's $HOME.
func (c *Config) DockerConfigDir() string { return c.StateDir + "/docker" }

// TenancyTimeout is the per-call timeout towards tenancy.
func (c *Config) TenancyTimeout() time.Duration {
	return time.Duration(c.Tenancy.TimeoutS) * time.Second
}

// BaoTimeout is the per-call timeout towards OpenBao.
func (c *Config) BaoTimeout() time.Duration { return time.Duration(c.Bao.TimeoutS) * time.Second }

// Tier is the <tier> of an env_id env-<tier>-<nn>, "" when env_id has another shape.
func Tier(envID string) string {
	const p = "env-"
	if len(envID) <= len(p) || envID[:len(p)] != p {
		return ""
	}
	rest := envID[len(p):]
	for i := len(rest) - 1; i >= 0; i-- {
		if rest[i] == '-' {
			return rest[:i]
		}
	}
	return ""
}
