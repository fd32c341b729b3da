package docker

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// TestCheckGroup: a socket the process may not use while it lacks the socket's group is
// DOCKER_GROUP_MISSING naming the socket, the group, the user and the usermod that fixes it; a
// usable socket, no socket and a refusal that is not the group's are
// nothing to say.
func TestCheckGroup(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	if err := os.WriteFile(sock, nil, 0o660); err != nil {
		t.Fatal(err)
	}
	gid := 65534 // nogroup, or whatever name the box gives it
	if err := os.Chown(sock, -1, gid); err != nil {
		t.Skipf("chown to gid %d: %v", gid, err)
	}
	group := strconv.Itoa(gid)
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	me := strconv.Itoa(os.Geteuid())
	if u, err := user.Current(); err == nil {
		me = u.Username
	}
	defer func(a func(string, uint32) error, g func() ([]int, error)) { access, groupsOf = a, g }(access, groupsOf)
	access = func(string, uint32) error { return syscall.EACCES }
	groupsOf = func() ([]int, error) { return []int{4242}, nil }

	err := CheckGroup(sock)
	var e *effects.Error
	if !errors.As(err, &e) || e.Code != vocab.DockerGroupMissing || effects.KindOf(err) != effects.Permanent {
		t.Fatalf("CheckGroup = %v, want a permanent DOCKER_GROUP_MISSING", err)
	}
	for _, w := range []string{sock, "group " + group, me + " may not use", "sudo usermod -aG " + group + " " + me} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err.Error(), w)
		}
	}

	groupsOf = func() ([]int, error) { return []int{4242, gid}, nil }
	if err := CheckGroup(sock); err != nil {
		t.Errorf("in the socket's group and refused: %v, want nothing (not a missing group)", err)
	}
	groupsOf = func() ([]int, error) { return nil, nil }
	access = func(string, uint32) error { return nil }
	if err := CheckGroup(sock); err != nil {
		t.Errorf("a usable socket: %v", err)
	}
	access = func(string, uint32) error { return syscall.EACCES }
	if err := CheckGroup(filepath.Join(t.TempDir(), "none.sock")); err != nil {
		t.Errorf("no socket: %v", err)
	}

	// docker runs with the agent's environment for it, never the agent's own: a DOCKER_HOST
	// there moves neither the socket docker dials nor the one checked
	t.Setenv("DOCKER_HOST", "tcp://127.0.0.1:2375")
	c := New("docker", "p", t.TempDir())
	if c.Socket != DefaultSocket {
		t.Errorf("the socket checked: %q, want %s", c.Socket, DefaultSocket)
	}
	for _, kv := range c.env() {
		if strings.HasPrefix(kv, "DOCKER_HOST=") {
			t.Errorf("docker's environment carries %s", kv)
		}
	}
}
