package docker

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"syscall"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// DOCKER_GROUP_MISSING (vocab.DockerGroupMissing): docker's socket refuses the agent because its user is not in the socket's
// group (docker). The unit names no SupplementaryGroups= (systemd fails a unit whose group
// does not exist, 216/GROUP, before the agent can say anything): the user's own groups are what
// the agent runs with, and the package's postinst adds it to docker when the group exists.

// DefaultSocket is the docker engine's socket the CLI dials: docker's environment is the agent's
// own (env), with no DOCKER_HOST, and its DOCKER_CONFIG names no context, so a DOCKER_HOST in
// the agent's environment moves nothing docker does.
const DefaultSocket = "/var/run/docker.sock"

// access is access(2) (a test stands in: root passes every check).
var access = syscall.Access

// groupsOf is the process's supplementary and effective group ids (a test stands in).
var groupsOf = func() ([]int, error) {
	g, err := os.Getgroups()
	return append(g, os.Getegid()), err
}

// CheckGroup says whether this process may use docker's socket at sock: nil when it may, when
// there is no socket there (no engine: the docker calls say so in their own words) or when the
// refusal is not a missing group; else an *effects.Error with code DOCKER_GROUP_MISSING naming
// the socket's group, the user and the fix. It only stats the socket and asks access(2).
func CheckGroup(sock string) error {
	if sock == "" {
		return nil
	}
	fi, err := os.Stat(sock)
	if err != nil {
		return nil
	}
	if err := access(sock, 2 /* W_OK */); err == nil || !errors.Is(err, syscall.EACCES) {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	gids, err := groupsOf()
	if err != nil || slices.Contains(gids, int(st.Gid)) {
		return nil // in the group and still refused: not a missing group
	}
	me := strconv.Itoa(os.Geteuid())
	if u, err := user.Current(); err == nil {
		me = u.Username
	}
	group := strconv.Itoa(int(st.Gid))
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	fix := fmt.Sprintf("sudo usermod -aG %s %s   # the next tick runs with it", group, me)
	if group == "root" || st.Gid == 0 {
		fix = fmt.Sprintf("install Docker Engine's docker group (sudo groupadd docker && sudo systemctl restart docker.socket docker), then: sudo usermod -aG docker %s", me)
	}
	return &effects.Error{Op: "docker", Kind: effects.Permanent, Code: vocab.DockerGroupMissing,
		Msg:  fmt.Sprintf("%s may not use docker's socket %s (group %s, mode %04o): it is not in group %s", me, sock, group, fi.Mode().Perm(), group),
		Hint: fix, Err: syscall.EACCES}
}
