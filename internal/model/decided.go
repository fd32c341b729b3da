package model

// Fields decided: the fields a compose file most often sets beyond the allowlist, each with
// what it would do — kept off the list for it, or found harmless and refused only until the
// contract of record (PROTOCOL.md §2) lists it. A refusal of one says what it would do, in
// these words; docs/SECURITY.md's table "Fields decided" is this table, and a test keeps the
// two equal. The words hold no "; " (a refusal's detail joins its findings with it).
type decided struct {
	// scope is whose field it is: "" a service's, "network" a top-level network's.
	scope  string
	fields []string
	// harmless: it acts inside the container or limits it, and may be listed; refused today
	// only because the list does not name it.
	harmless bool
	// effect is what the field would do.
	effect string
}

var fieldsDecided = []decided{
	{"", []string{"tty", "stdin_open", "attach"}, true, "a terminal and stdin for the container's own process, and whether compose shows its logs"},
	{"", []string{"dns", "dns_search", "dns_opt", "domainname"}, true, "the container's own `resolv.conf` and name, which reach no resolver its network does not reach anyway"},
	{"", []string{"group_add"}, true, "supplementary groups inside the container, where `user` already sets any uid and gid and no bind reaches a host file outside the release"},
	{"", []string{"pids_limit", "mem_reservation", "memswap_limit", "cpu_shares", "cpu_period", "cpu_quota", "cpuset"}, true, "limits and weights on the container's own use, like the listed `mem_limit`, `cpus` and `deploy.resources.limits.pids`"},
	{"", []string{"container_name"}, false, "container names are global to the engine: a fixed name can take the one another project's compose gives its container (`<project>-<service>-1`) and stop that project's `up`"},
	{"", []string{"oom_kill_disable", "oom_score_adj"}, false, "the host's OOM killer then spares the container and kills the box's other processes, the agent among them"},
	{"", []string{"cgroup_parent", "cpu_rt_runtime", "cpu_rt_period"}, false, "a cgroup of the host's outside docker's own, and real-time CPU time that can starve the host"},
	{"", []string{"mac_address"}, false, "the container picks its own address on the bridge, where it can copy the host's bridge interface's or a neighbour's, and no service needs it"},
	{"", []string{"annotations"}, false, "handed to the OCI runtime, which acts on some (crun's `run.oci.*`)"},
	{"", []string{"blkio_config", "storage_opt"}, false, "they name the host's block devices and size the engine's storage"},
	{"", []string{"runtime", "isolation"}, false, "a runtime the host configured for other uses, or Windows isolation"},
	{"", []string{"external_links", "volumes_from", "links"}, false, "another project's containers and their volumes (`links` is compose's legacy form of `depends_on` and networks)"},
	{"network", []string{"ipam"}, false, "a subnet the bundle picks is routed by the host into the project's bridge, and one carved out of the host's LAN takes the host's traffic to its neighbours (the engine picks each subnet from the pools the host's owner configured)"},
	{"network", []string{"driver_opts"}, false, "the bridge driver's options name host interfaces, masquerading and the host address ports bind to"},
}

// decision is the row of fieldsDecided for field (a whole field, as the walk names it) of
// scope, and whether there is one.
func decision(scope, field string) (decided, bool) {
	for _, d := range fieldsDecided {
		if d.scope == scope {
			for _, f := range d.fields {
				if f == field {
					return d, true
				}
			}
		}
	}
	return decided{}, false
}

// refuseField words a field the allowlist does not name, by what it would do when the table
// decided it: one kept off the list is a finding of its own (add), its words its effect; one
// found harmless, or never decided, is refused only because the list does not name it
// (unlisted).
func refuseField(scope, field string, add, unlisted func(field, what string)) {
	d, ok := decision(scope, field)
	switch {
	case !ok:
		unlisted(field, field+" is not allowed")
	case d.harmless:
		unlisted(field, field+" is not allowed until PROTOCOL.md §2 lists it: found harmless ("+d.effect+")")
	default:
		add(field, field+" is not allowed: "+d.effect)
	}
}
