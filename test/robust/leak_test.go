package robust

// The secret canary scan: every KV secret is a unique canary (writeReleases), the token and
// the grants are read where the agent keeps them, and every output, state file, report and
// temp file the runs leave is scanned for each value in every encoding a leak could take.

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// forms are the encodings a value is searched in: raw, base64 (std and URL alphabets, at the
// three byte offsets a prefix can put it at), hex (both cases), URL- and JSON-escaped.
func forms(v string) map[string]string {
	out := map[string]string{"raw": v, "hex": hex.EncodeToString([]byte(v)), "HEX": strings.ToUpper(hex.EncodeToString([]byte(v)))}
	if q := url.QueryEscape(v); q != v {
		out["url"] = q
	}
	if j, _ := json.Marshal(v); string(j[1:len(j)-1]) != v {
		out["json"] = string(j[1 : len(j)-1])
	}
	for k := 0; k < 3; k++ {
		for name, enc := range map[string]*base64.Encoding{"b64": base64.StdEncoding, "b64url": base64.URLEncoding} {
			full := enc.EncodeToString(append(make([]byte, k), v...))
			start := (k + 2) / 3 * 4    // the first group holding no prefix byte
			end := (k + len(v)) / 3 * 4 // the last group holding no byte past the value
			if end-start >= 8 {
				out[name+"@"+string(rune('0'+k))] = full[start:end]
			}
		}
	}
	return out
}

type hit struct{ where, secret, form string }

// scan finds every form of every needle in hay, and in hay with its line breaks removed.
func scan(where string, hay []byte, needles map[string]string) []hit {
	var hits []hit
	flat := strings.NewReplacer("\n", "", "\r", "").Replace(string(hay))
	for name, v := range needles {
		for form, f := range forms(v) {
			if bytes.Contains(hay, []byte(f)) || strings.Contains(flat, f) {
				hits = append(hits, hit{where, name, form})
			}
		}
	}
	return hits
}

func TestSecretLeaks(t *testing.T) {
	b := startBox(t)
	needles := map[string]string{}
	for k, v := range canaries {
		needles[k] = v
	}
	needles["bootstrap grant"] = b.Grant

	b.Desire("v1")
	// stop the tick with the leased grant on disk, to learn its value
	if r := b.tick("MONKY_DEPLOYD_FAILPOINT=after:Leased"); r.Sig != syscall.SIGKILL {
		t.Fatalf("after:Leased: exit %d signal %v", r.Code, r.Sig)
	}
	g, err := os.ReadFile(filepath.Join(b.StateDir, "lease.grant"))
	if err != nil {
		t.Fatalf("leased grant: %v", err)
	}
	needles["lease grant"] = strings.TrimSpace(string(g))
	for _, step := range []func(){
		func() {},
		func() {}, // heartbeat
		func() { b.Desire("v2") },
	} {
		step()
		if r := b.tick(); r.Code != 0 {
			t.Fatalf("tick: exit %d: %s", r.Code, r.Stderr)
		}
	}
	tok, err := os.ReadFile(filepath.Join(b.StateDir, "bao.token"))
	if err != nil {
		t.Fatal(err)
	}
	needles["token"] = strings.TrimSpace(string(tok))
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"explain"}, {"explain", "--json"}, {"explain", "-n", "50"}} {
		if r := b.agent(nil, args...); r.Code != 0 {
			t.Errorf("%v: exit %d: %s", args, r.Code, r.Stderr)
		}
	}
	b.Sim("reports") // kept in b.Outputs
	for name, v := range needles {
		if len(v) < 12 {
			t.Fatalf("%s is too short to scan for", name)
		}
	}

	var hits, controls []hit
	files := 0
	_ = filepath.WalkDir(b.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(b.Dir, p)
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		files++
		if filepath.Base(rel) == filepath.Base(b.DockerLog) {
			raw = withoutModels(raw)
		}
		h := scan(rel, raw, needles)
		if secretHome(rel) {
			controls = append(controls, h...)
		} else {
			hits = append(hits, h...)
		}
		return nil
	})
	for i, o := range b.Outputs {
		hits = append(hits, scan(fmt.Sprintf("output #%d", i), []byte(o), needles)...)
	}
	// positive controls: the scanner finds the secrets where they belong, in their forms
	want := map[string]bool{"db secret/raw": false, "gemini v2 secret/raw": false, "token/raw": false}
	b64 := false
	for _, c := range controls {
		want[c.secret+"/"+c.form] = true
		if c.secret == "registry secret" && strings.HasPrefix(c.form, "b64@") {
			b64 = true // docker's config.json holds base64("deploy:"+password)
		}
	}
	for k, ok := range want {
		if !ok {
			t.Errorf("positive control: %s not found where it belongs: the scan would prove nothing", k)
		}
	}
	if !b64 {
		t.Error("positive control: the registry password is not found base64-encoded in docker/config.json")
	}
	// a planted canary in every form is found
	for form, f := range forms(needles["token"]) {
		if h := scan("planted", []byte("x\n"+f[:len(f)/2]+"\n"+f[len(f)/2:]+"\n"), needles); len(h) == 0 {
			t.Errorf("planted token in form %s (split by a line break) not found", form)
		}
	}
	for _, h := range hits {
		t.Errorf("LEAK: %s in form %s in %s", h.secret, h.form, h.where)
	}
	t.Logf("canary scan: %d secrets × %d forms, %d files and %d outputs scanned, %d leaks", len(needles), len(forms(needles["token"])), files, len(b.Outputs), len(hits))
}
