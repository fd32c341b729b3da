package docker

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteDockerConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "docker")
	if err := os.MkdirAll(dir, 0o755); err != nil { // a looser dir is tightened
		t.Fatal(err)
	}
	a := RegistryAuth{Registry: "harbor.tikali.net", Username: "robot$monky", Password: "pa:ss"}
	if err := WriteDockerConfig(dir, a); err != nil {
		t.Fatal(err)
	}
	check := func() []byte {
		t.Helper()
		st, err := os.Stat(dir)
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("dir mode = %v, %v", st.Mode().Perm(), err)
		}
		p := filepath.Join(dir, "config.json")
		st, err = os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("config.json mode = %v, %v", st.Mode().Perm(), err)
		}
		body, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Auths map[string]struct {
				Auth string `json:"auth"`
			} `json:"auths"`
		}
		if err := json.Unmarshal(body, &cfg); err != nil {
			t.Fatal(err)
		}
		dec, _ := base64.StdEncoding.DecodeString(cfg.Auths["harbor.tikali.net"].Auth)
		if string(dec) != "robot$monky:pa:ss" || len(cfg.Auths) != 1 {
			t.Errorf("config.json = %s", body)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Errorf("dir holds %d entries, want config.json alone", len(entries))
		}
		return body
	}
	first := check()
	if err := WriteDockerConfig(dir, a); err != nil {
		t.Fatal(err)
	}
	if second := check(); string(second) != string(first) {
		t.Errorf("rewrite changed the file")
	}
	// A fresh dir is created 0700.
	fresh := filepath.Join(t.TempDir(), "a", "docker")
	if err := WriteDockerConfig(fresh, a); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(fresh); st.Mode().Perm() != 0o700 {
		t.Errorf("fresh dir mode %v", st.Mode().Perm())
	}
}
