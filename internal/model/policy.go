package model

import (
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/sanitize"
)

// The privileged policy is an allowlist (PROTOCOL.md §2, "What a service may hold without
// allow_privileged"): it walks every field compose-go's loaded model sets and refuses each
// one the lists below do not name, so a compose field added tomorrow is refused until it is
// listed here. The lists are written in compose's own spelling (the model's yaml tags); a
// dotted name allows only that part of a section. docs/SECURITY.md lists them too, and a
// test keeps the two equal.

// serviceAllowed are the fields a service may set. Some are checked further by value
// (serviceValues). A field with parts is listed part by part: `*` stands for each entry of a
// list or each key of a mapping (`networks.*.aliases`: the aliases of any network the service
// joins), a name for that key only (`ulimits.nofile`), so a part not named — a fixed address on
// a network, a ulimit on real-time priority, a bind's mount propagation — is refused like a
// field not listed (AGENT.md's amendments of 2026-12-02: the list decides by effect).
var serviceAllowed = []string{
	"cap_add", "cap_drop", "command", "configs.*.gid", "configs.*.mode", "configs.*.source",
	"configs.*.target", "configs.*.uid", "cpus",
	"depends_on.*.condition", "depends_on.*.required", "depends_on.*.restart",
	"deploy.replicas", "deploy.resources.limits.cpus", "deploy.resources.limits.memory",
	"deploy.resources.limits.pids", "deploy.restart_policy.condition", "deploy.restart_policy.delay",
	"deploy.restart_policy.max_attempts", "deploy.restart_policy.window",
	"entrypoint", "env_file.*.format", "env_file.*.path", "env_file.*.required", "environment", "expose", "extra_hosts",
	"healthcheck.disable", "healthcheck.interval", "healthcheck.retries", "healthcheck.start_interval",
	"healthcheck.start_period", "healthcheck.test", "healthcheck.timeout",
	"hostname", "image", "init", "labels", "logging.driver",
	"logging.options.compress", "logging.options.env", "logging.options.env-regex", "logging.options.labels",
	"logging.options.labels-regex", "logging.options.max-file", "logging.options.max-size", "logging.options.tag",
	"mem_limit", "networks.*.aliases", "networks.*.priority",
	"platform", "ports.*.app_protocol", "ports.*.host_ip", "ports.*.mode", "ports.*.name", "ports.*.protocol",
	"ports.*.published", "ports.*.target", "profiles", "pull_policy", "read_only", "restart", "scale",
	"secrets.*.gid", "secrets.*.mode", "secrets.*.source", "secrets.*.target", "secrets.*.uid",
	"security_opt", "shm_size", "stop_grace_period", "stop_signal", "sysctls", "tmpfs",
	"ulimits.core", "ulimits.nofile", "ulimits.nproc",
	"user", "volumes.*.bind.create_host_path", "volumes.*.consistency", "volumes.*.read_only",
	"volumes.*.source", "volumes.*.target", "volumes.*.tmpfs.mode", "volumes.*.tmpfs.size", "volumes.*.type",
	"volumes.*.volume.labels", "volumes.*.volume.nocopy", "volumes.*.volume.subpath", "working_dir",
}

// ulimitMax bounds the ulimits a service may set, soft and hard alike: raising nofile or
// nproc past what the host's own default gives a container, or core dumps past 1 GiB (which
// the host's core handler writes to the host's disk), is refused; a value of -1 (unlimited)
// too. Lowering any of them only limits the container.
var ulimitMax = map[string]int{"core": 1 << 30, "nofile": 1 << 20, "nproc": 1 << 22}

// topAllowed are the top-level keys a compose file may hold (besides x-* extensions, which
// compose ignores). include and extends are resolved by the loader (their files must be of
// the release) and are no longer in the model.
var topAllowed = []string{"configs", "name", "networks", "secrets", "services", "volumes"}

// networkAllowed and volumeAllowed are the fields of a top-level network or volume; the
// driver, the name and external are checked by value.
var (
	networkAllowed = []string{"attachable", "driver", "enable_ipv4", "enable_ipv6", "external", "internal", "labels", "name"}
	volumeAllowed  = []string{"driver", "external", "labels", "name"}
)

// defaultCaps are the capabilities Docker grants a container by default: adding one is a
// no-op, adding any other is refused.
var defaultCaps = []string{
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
	"NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

// logDrivers are the logging drivers a service may name (none: the daemon's default).
var logDrivers = []string{"journald", "json-file", "local"}

// Finding is one thing the policy refuses without agent.allow_privileged.
type Finding struct {
	// Who holds it: "service api", "network host", "volume data", "secret token",
	// "config keys"; "" for the compose file as a whole.
	Who string
	// Field is the compose field refused, in compose's spelling ("cap_add",
	// "deploy.resources.reservations", "volumes").
	Field string
	// What says what is refused, the field first ("device_cgroup_rules is not allowed",
	// "cap_add DAC_READ_SEARCH", "bind / → /host").
	What string
	// Unlisted: the field is refused only because the allowlist does not name it, not
	// because it was found to give power over the host.
	Unlisted bool
}

// OnlyUnlisted reports whether every one of f (at least one) is a field the allowlist does
// not name: the refusal's reason is then vocab.ReasonUnlistedField.
func OnlyUnlisted(f []Finding) bool {
	for _, x := range f {
		if !x.Unlisted {
			return false
		}
	}
	return len(f) > 0
}

func (f Finding) String() string {
	if f.Who == "" {
		return f.What
	}
	return f.Who + ": " + f.What
}

// CheckModel runs the privileged policy on a loaded compose project — the model compose will
// run, loaded with ResolvePaths so that every bind source, env_file and secret file is
// absolute, with p.ComposeFiles naming the files compose is given — whose release directory
// is releaseDir. It returns what PRIVILEGED_REFUSED refuses, in a fixed order (top-level
// keys, services by name, writable binds, jobs, networks, volumes, secrets, configs); nil
// when allowPrivileged is set or nothing is refused.
//
// A finding may quote a value of the model (a bind source, a capability, a driver): a caller
// that loaded the model with the secrets' values masks them before the words go anywhere.
func CheckModel(p *types.Project, releaseDir string, allowPrivileged bool) []Finding {
	if allowPrivileged || p == nil {
		return nil
	}
	root := filepath.Clean(releaseDir)
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	pol := &policy{root: root}
	return pol.check(p)
}

// policy is what the checks need to know besides the model: the release directory, and
// for the check before the lease the scratch directory standing for it and the pattern of
// the placeholders standing for values not known yet.
type policy struct {
	root    string
	private string         // the scratch release's private parent; "" for a real release
	ph      *regexp.Regexp // placeholders; nil when the model holds real values
}

func (pol *policy) placeholder(v string) bool { return pol.ph != nil && pol.ph.MatchString(v) }

// check lists the findings of the whole project.
func (pol *policy) check(p *types.Project) []Finding {
	var out []Finding
	add := func(who, field, what string) { out = append(out, Finding{Who: who, Field: field, What: what}) }
	unlisted := func(who, field, what string) {
		out = append(out, Finding{Who: who, Field: field, What: what, Unlisted: true})
	}

	topSet(p, func(field string) { unlisted("", field, field+" is not allowed") })

	services := union(p.Services, p.DisabledServices)
	for _, n := range slices.Sorted(maps.Keys(services)) {
		s := services[n]
		who := "service " + bundle.QuoteName(n)
		pol.service(p, &s, func(field, what string) { add(who, field, what) }, func(field, what string) { unlisted(who, field, what) })
	}
	pol.writable(p, services, add)
	jobs := union(p.Jobs, p.DisabledJobs)
	for _, n := range slices.Sorted(maps.Keys(jobs)) {
		unlisted("job "+bundle.QuoteName(n), "jobs", "jobs are not allowed")
	}
	for _, n := range slices.Sorted(maps.Keys(p.Networks)) {
		pol.network(p.Name, n, p.Networks[n], func(field, what string) { add("network "+bundle.QuoteName(n), field, what) },
			func(field, what string) { unlisted("network "+bundle.QuoteName(n), field, what) })
	}
	for _, n := range slices.Sorted(maps.Keys(p.Volumes)) {
		pol.volume(p.Name, n, p.Volumes[n], func(field, what string) { add("volume "+bundle.QuoteName(n), field, what) },
			func(field, what string) { unlisted("volume "+bundle.QuoteName(n), field, what) })
	}
	for _, n := range slices.Sorted(maps.Keys(p.Secrets)) {
		if f := pol.fileObject(types.FileObjectConfig(p.Secrets[n])); f != "" {
			add("secret "+bundle.QuoteName(n), "secrets", f)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(p.Configs)) {
		if f := pol.fileObject(types.FileObjectConfig(p.Configs[n])); f != "" {
			add("config "+bundle.QuoteName(n), "configs", f)
		}
	}
	return out
}

// topSet calls refuse for each top-level key of p that topAllowed does not name.
func topSet(p *types.Project, refuse func(field string)) {
	walkSet(reflect.ValueOf(*p), "", allowSet(topAllowed), func(string, reflect.Value) {}, func(field string, _ reflect.Value) {
		if field != "jobs" { // each job is named below
			refuse(field)
		}
	})
}

// service checks one service: every field it sets against serviceAllowed, then the values
// of the allowed fields that have rules of their own. unlisted adds a field refused only
// because the allowlist does not name it; add, any other finding.
func (pol *policy) service(p *types.Project, s *types.ServiceConfig, add, unlisted func(field, what string)) {
	checked := map[string]bool{}
	walkSet(reflect.ValueOf(*s), "", allowSet(serviceAllowed),
		func(field string, _ reflect.Value) {
			top := field[:strings.IndexAny(field+".", ".[")]
			if !checked[top] {
				checked[top] = true
				pol.serviceValues(p, s, top, add)
			}
		},
		func(field string, v reflect.Value) { pol.notAllowed(s, field, v, add, unlisted) })
}

// notAllowed words a field the allowlist does not name; the fields every earlier version
// refused keep their words (add: found to give power over the host), any other by what it
// would do when docs/SECURITY.md's "Fields decided" decided it (refuseField), else unlisted.
func (pol *policy) notAllowed(s *types.ServiceConfig, field string, v reflect.Value, add, unlisted func(field, what string)) {
	c := &s.ContainerSpec
	switch field {
	case "name", "extends":
		return // set by the loader: the service's key; extends is resolved into the model
	case "privileged":
		add(field, "privileged: true")
	case "network_mode", "pid", "ipc", "uts", "userns_mode", "cgroup":
		add(field, field+": "+pol.show(strings.TrimSpace(v.String())))
	case "devices":
		for _, d := range c.Devices {
			add(field, "devices "+pol.show(d.Source)+" → "+pol.show(d.Target))
		}
	case "use_api_socket":
		add(field, "use_api_socket: true (the docker socket)")
	case "build":
		add(field, "build section (the agent runs images, it does not build them)")
	case "provider":
		add(field, "provider "+pol.show(s.Provider.Type)+" (runs a program on the host)")
	default:
		refuseField("", field, add, unlisted)
	}
}

// serviceValues checks the value of an allowed field that has rules of its own.
func (pol *policy) serviceValues(p *types.Project, s *types.ServiceConfig, field string, add func(field, what string)) {
	c := &s.ContainerSpec
	switch field {
	case "cap_add":
		for _, cp := range c.CapAdd {
			u := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(cp)), "CAP_")
			switch {
			case pol.placeholder(cp):
				add(field, "cap_add "+pol.depends(cp))
			case !contains(defaultCaps, u):
				add(field, "cap_add "+pol.show(u))
			}
		}
	case "security_opt":
		for _, o := range c.SecurityOpt {
			switch {
			case pol.placeholder(o):
				add(field, "security_opt "+pol.depends(o))
			case !noNewPrivileges(o):
				add(field, "security_opt "+pol.show(o))
			}
		}
	case "sysctls":
		for _, k := range slices.Sorted(maps.Keys(c.Sysctls)) {
			if !strings.HasPrefix(k, "net.") {
				add(field, "sysctls "+pol.show(k)+" is not allowed (only net.*)")
			}
		}
	case "logging":
		if d := c.Logging.Driver; d != "" && !contains(logDrivers, d) {
			add(field, "logging driver "+pol.show(d)+" is not allowed")
		}
	case "env_file":
		for _, e := range c.EnvFiles {
			if why := pol.hostPath(e.Path); why != "" {
				add(field, "env_file "+why)
			}
		}
	case "volumes":
		for _, v := range c.Volumes {
			pol.mount(p, v, add)
		}
	case "ulimits":
		for _, n := range slices.Sorted(maps.Keys(c.Ulimits)) {
			max, u := ulimitMax[n], c.Ulimits[n]
			if u == nil || max == 0 {
				continue // a ulimit not listed is refused as a field
			}
			for _, v := range []int{u.Single, u.Soft, u.Hard} {
				if v < 0 || v > max {
					add("ulimits."+n, fmt.Sprintf("ulimits %s %d is not allowed (0 to %d)", n, v, max))
					break
				}
			}
		}
	}
}

// mount checks one of a service's volumes: a bind of a path inside the release directory, a
// named volume of this file, an anonymous volume or a tmpfs.
func (pol *policy) mount(p *types.Project, v types.ServiceVolumeConfig, add func(field, what string)) {
	switch v.Type {
	case types.VolumeTypeBind:
		if why := pol.hostPath(v.Source); why != "" {
			add("volumes", "bind "+why+" → "+pol.show(v.Target))
		}
	case types.VolumeTypeVolume:
		if v.Source == "" {
			return // anonymous
		}
		vol, ok := p.Volumes[v.Source]
		if !ok {
			add("volumes", "volume "+pol.show(v.Source)+" is not a volume of this file")
			return
		}
		if why := pol.localBind(vol); why != "" {
			add("volumes", "volume "+bundle.QuoteName(v.Source)+" binds "+why+" (driver_opts) → "+pol.show(v.Target))
		}
		if v.Volume != nil && climbs(v.Volume.Subpath) {
			add("volumes", "volume "+bundle.QuoteName(v.Source)+" subpath "+pol.show(v.Volume.Subpath)+" is not allowed (a path inside the volume, never absolute, never `..`) → "+pol.show(v.Target))
		}
	case types.VolumeTypeTmpfs:
	case types.VolumeTypeNamedPipe:
		add("volumes", "npipe "+pol.show(v.Source)+" → "+pol.show(v.Target))
	default:
		add("volumes", "volume of type "+pol.show(v.Type)+" → "+pol.show(v.Target)+" is not allowed")
	}
}

// writable refuses what lets a container change what a later compose call resolves: a
// writable bind of the release directory itself; of a directory that holds a path compose
// resolves again at the next call — another bind's source (a container could put a symlink
// to / in its place), an env_file, a secret's or config's file, a compose file, .env; or of
// a file compose reads (a compose file, .env, an env_file), whose content it would change.
// Read-only binds (`:ro`) are allowed.
func (pol *policy) writable(p *types.Project, services map[string]types.ServiceConfig, add func(who, field, what string)) {
	type use struct {
		which string // "service web binds", "compose reads as the compose file"
		path  string
		read  bool // compose reads the file's content
	}
	uses := []use{{"compose reads as .env", filepath.Join(pol.root, bundle.EnvFile), true}}
	for _, f := range p.ComposeFiles {
		uses = append(uses, use{"compose reads as the compose file", f, true})
	}
	for _, n := range slices.Sorted(maps.Keys(services)) {
		who := "service " + bundle.QuoteName(n)
		s := services[n]
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				uses = append(uses, use{who + " binds", v.Source, false})
			}
		}
		for _, e := range s.EnvFiles {
			uses = append(uses, use{who + " reads as env_file", e.Path, true})
		}
	}
	for _, n := range slices.Sorted(maps.Keys(p.Secrets)) {
		uses = append(uses, use{"is the file of secret " + bundle.QuoteName(n), p.Secrets[n].File, false})
	}
	for _, n := range slices.Sorted(maps.Keys(p.Configs)) {
		uses = append(uses, use{"is the file of config " + bundle.QuoteName(n), p.Configs[n].File, false})
	}
	for _, n := range slices.Sorted(maps.Keys(services)) {
		who := "service " + bundle.QuoteName(n)
		for _, v := range services[n].Volumes {
			if v.Type != types.VolumeTypeBind || v.ReadOnly || pol.placeholder(v.Source) {
				continue
			}
			src := filepath.Clean(v.Source)
			if !pol.inside(src) {
				continue // refused as a bind outside the release directory
			}
			if src == pol.root {
				add(who, "volumes", "writable bind of the release directory → "+pol.show(v.Target)+" (mount it :ro)")
				continue
			}
			seen := map[string]bool{}
			for _, u := range uses {
				if u.path == "" || pol.placeholder(u.path) {
					continue
				}
				q := filepath.Clean(u.path)
				var what string
				switch {
				case q == src && u.read:
					what = "writable bind of " + pol.rel(src) + ", which " + u.which
				case strings.HasPrefix(q, src+string(filepath.Separator)):
					what = "writable bind " + pol.rel(src) + " holds " + pol.rel(q) + ", which " + u.which
				default:
					continue
				}
				if !seen[what] {
					seen[what] = true
					add(who, "volumes", what+" (mount it :ro)")
				}
			}
		}
	}
}

// rel shows a path inside the release directory relative to it ("./data/conf").
func (pol *policy) rel(c string) string {
	r, err := filepath.Rel(pol.root, c)
	if err != nil || r == "." {
		return "."
	}
	return "./" + pol.show(filepath.ToSlash(r))
}

// network checks a top-level network: the default driver or bridge, never the host's `host`
// or `none` network, named after this project (external or not: another name joins another
// project's network), no driver_opts.
func (pol *policy) network(project, key string, n types.NetworkConfig, add, unlisted func(field, what string)) {
	walkSet(reflect.ValueOf(n), "", allowSet(networkAllowed), func(string, reflect.Value) {}, func(field string, _ reflect.Value) {
		refuseField("network", field, add, unlisted)
	})
	for _, name := range []string{key, n.Name} {
		if name == "host" || name == "none" {
			add("name", "name "+name+" is not allowed (the host's own network stack, or none)")
			return
		}
	}
	if d := n.Driver; d != "" && d != "bridge" {
		add("driver", "driver "+pol.show(d)+" is not allowed")
	}
	switch {
	case bool(n.External) && !ofProject(project, n.Name):
		add("external", "external network "+pol.show(n.Name)+" is not allowed (only one named after project "+project+")")
	case !bool(n.External) && n.Name != "" && !ofProject(project, n.Name):
		add("name", "name "+pol.show(n.Name)+" is not allowed (a network's name is this project's, "+project+"_…)")
	}
}

// volume checks a top-level volume: the local driver with no driver_opts, named after this
// project (external or not: another name is another project's data).
func (pol *policy) volume(project, key string, v types.VolumeConfig, add, unlisted func(field, what string)) {
	walkSet(reflect.ValueOf(v), "", allowSet(volumeAllowed), func(string, reflect.Value) {}, func(field string, _ reflect.Value) {
		if field == "driver_opts" {
			var opts []string
			for _, k := range slices.Sorted(maps.Keys(v.DriverOpts)) {
				if k == "type" || k == "o" {
					opts = append(opts, k+"="+pol.show(v.DriverOpts[k]))
				} else {
					opts = append(opts, pol.show(k))
				}
			}
			add(field, "driver_opts is not allowed ("+strings.Join(opts, ", ")+")")
			return
		}
		unlisted(field, field+" is not allowed")
	})
	if d := v.Driver; d != "" && d != "local" {
		add("driver", "driver "+pol.show(d)+" is not allowed")
	}
	switch {
	case bool(v.External) && !ofProject(project, v.Name):
		add("external", "external volume "+pol.show(v.Name)+" is not allowed (only one named after project "+project+")")
	case !bool(v.External) && v.Name != "" && !ofProject(project, v.Name):
		add("name", "name "+pol.show(v.Name)+" is not allowed (a volume's name is this project's, "+project+"_…)")
	}
}

// climbs says whether a volume's subpath leaves the volume: absolute, or holding a `..`
// segment (docker resolves it below the volume's own directory on the host).
func climbs(sub string) bool {
	if sub == "" {
		return false
	}
	s := strings.ReplaceAll(sub, `\`, "/")
	return path.IsAbs(s) || slices.Contains(strings.Split(s, "/"), "..")
}

// ofProject says whether a network or volume name is this project's own.
func ofProject(project, name string) bool {
	return project != "" && (name == project || strings.HasPrefix(name, project+"_"))
}

// noNewPrivileges says whether a security_opt is no-new-privileges (true or false), the one
// option allowed.
func noNewPrivileges(o string) bool {
	o = strings.ToLower(strings.TrimSpace(o))
	switch o {
	case "no-new-privileges", "no-new-privileges:true", "no-new-privileges=true", "no-new-privileges:false", "no-new-privileges=false":
		return true
	}
	return false
}

// fileObject checks a top-level secret or config: a file outside the release directory, or
// a value taken from the agent's environment.
func (pol *policy) fileObject(o types.FileObjectConfig) string {
	if o.External {
		return ""
	}
	if o.File != "" {
		if why := pol.hostPath(o.File); why != "" {
			return "file " + why
		}
	}
	if o.Environment != "" {
		return "taken from the agent's environment variable " + pol.show(o.Environment)
	}
	return ""
}

// localBind returns what a named volume of the local driver binds on the host when its
// driver_opts make it a bind mount (o=bind, or type=none with a device) of a path outside
// the release directory; "" otherwise.
func (pol *policy) localBind(v types.VolumeConfig) string {
	if v.External || (v.Driver != "" && v.Driver != "local") {
		return ""
	}
	device, hasDevice := v.DriverOpts["device"]
	if !hasDevice {
		return ""
	}
	o := strings.ToLower(v.DriverOpts["o"])
	bind := strings.EqualFold(v.DriverOpts["type"], "none")
	for _, opt := range strings.Split(o, ",") {
		if opt = strings.TrimSpace(opt); opt == "bind" || opt == "rbind" {
			bind = true
		}
	}
	if !bind {
		return ""
	}
	if !filepath.IsAbs(device) && !pol.placeholder(device) {
		return pol.show(device) + " (not an absolute path)"
	}
	return pol.hostPath(device)
}

// hostPath says which host path p is when it lies outside the release directory (or
// depends on a value not known before the lease), "" when it lies inside.
func (pol *policy) hostPath(p string) string {
	if pol.placeholder(p) {
		return pol.depends(p)
	}
	c := filepath.Clean(p)
	if pol.inside(c) {
		return ""
	}
	if pol.private != "" && (strings.HasPrefix(c, pol.private+string(filepath.Separator)) || c == pol.private) {
		if rel, err := filepath.Rel(pol.root, c); err == nil {
			return "<release>/" + filepath.ToSlash(rel)
		}
	}
	return pol.show(path.Clean(filepath.ToSlash(c)))
}

// inside says whether the clean absolute path c is the release directory or lies below it.
func (pol *policy) inside(c string) bool {
	return c == pol.root || strings.HasPrefix(c, pol.root+string(filepath.Separator))
}

// depends names the variables a value takes its meaning from.
func (pol *policy) depends(v string) string {
	var names []string
	for _, g := range pol.ph.FindAllStringSubmatch(v, -1) {
		src := "a secret"
		if g[1] == "e" {
			src = "the agent's environment"
		}
		names = append(names, "${"+g[2]+"} ("+src+")")
	}
	return "takes its value from " + strings.Join(names, ", ") + ", unknown before the lease"
}

// show prints a value from the bundle in a finding: placeholders as their variables, one
// line, control characters escaped.
func (pol *policy) show(v string) string {
	if pol.ph != nil {
		v = pol.ph.ReplaceAllString(v, "$${$2}")
	}
	return sanitize.Line(v)
}

// allowSet is a list of allowed (dotted) field names as a set that also holds every
// section leading to one of them.
func allowSet(list []string) map[string]bool {
	set := map[string]bool{}
	for _, f := range list {
		set[f] = true
		for i := strings.LastIndex(f, "."); i > 0; i = strings.LastIndex(f[:i], ".") {
			if !set[f[:i]] {
				set[f[:i]+"."] = true // a section: walk into it
			}
		}
	}
	return set
}

// walkSet walks the fields v (a struct) sets, by their yaml names: a field allowed
// whole goes to allowed, a section leading to an allowed field is walked into, and any
// other field set (non-zero) goes to refused. A section that is a list or a mapping is
// walked entry by entry: its parts are named `<section>.*.<part>` in the list for any entry,
// `<section>.<key>` for one key. Inline structs are walked at the same level; fields the yaml
// form does not carry (`-`) and extensions (x-*) are skipped. The callbacks get the field's
// name where it is (`networks.front.ipv4_address`, `volumes[1].bind.propagation`).
func walkSet(v reflect.Value, prefix string, allow map[string]bool, allowed, refused func(field string, v reflect.Value)) {
	walkStruct(v, prefix, prefix, allow, allowed, refused)
}

// walkStruct walks a struct's fields: pat is the prefix of their names in the list, at the
// prefix of their names where they are.
func walkStruct(v reflect.Value, pat, at string, allow map[string]bool, allowed, refused func(field string, v reflect.Value)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if name == "" && strings.Contains(opts, "inline") && fv.Kind() == reflect.Struct {
			walkStruct(fv, pat, at, allow, allowed, refused)
			continue
		}
		if name == "" || name == "-" || strings.HasPrefix(name, "#") || unset(fv) {
			continue
		}
		walkValue(fv, pat+name, at+name, allow, allowed, refused)
	}
}

// walkValue decides one value set at the field named pat in the list, at where it is.
func walkValue(v reflect.Value, pat, at string, allow map[string]bool, allowed, refused func(field string, v reflect.Value)) {
	switch {
	case allow[pat]:
		allowed(at, v)
		return
	case !allow[pat+"."]:
		refused(at, v)
		return
	}
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		walkStruct(v, pat+".", at+".", allow, allowed, refused)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			refused(at, v)
			return
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		for _, k := range keys {
			e := v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key()))
			if unset(e) {
				continue // `front:` with nothing under it
			}
			p := pat + "." + k
			if allow[pat+".*"] || allow[pat+".*."] {
				p = pat + ".*"
			}
			walkValue(e, p, at+"."+k, allow, allowed, refused)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if e := v.Index(i); !unset(e) {
				walkValue(e, pat+".*", fmt.Sprintf("%s[%d]", at, i), allow, allowed, refused)
			}
		}
	default:
		refused(at, v)
	}
}

// unset says whether a field of the model is not set: its zero value, or an empty list or
// mapping (which compose runs as if absent).
func unset(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Map, reflect.Slice:
		return v.Len() == 0
	}
	return v.IsZero()
}

func contains(list []string, s string) bool {
	i := sort.SearchStrings(list, s)
	return i < len(list) && list[i] == s
}

// findingStrings is the findings as the words a refusal's detail joins.
func findingStrings(f []Finding) []string {
	out := make([]string, 0, len(f))
	for _, x := range f {
		out = append(out, x.String())
	}
	return out
}
