// Command gen writes issue 37's hostile cost classes (package hostile) as unpacked bundle
// directories, one a class, for `make bench`: <out>/<case>/{bundle.json,compose.yaml} and the case's other files.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/tikali/monky-deployd/test/hostile"
)

func main() {
	out := flag.String("out", "", "the directory to write the bundles into")
	env := flag.String("env", "env-demo-01", "the bundles' env_id")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "gen: -out is required")
		os.Exit(2)
	}
	for _, c := range hostile.Cases() {
		dir := filepath.Join(*out, c.Name)
		names := []string{"compose.yaml"}
		var extra map[string][]byte
		if c.Files != nil {
			extra = c.Files()
			names = append(names, slices.Sorted(maps.Keys(extra))...)
		}
		list, _ := json.Marshal(names)
		meta := fmt.Sprintf(`{"env_id": %q, "compose_file": "compose.yaml", "agent": {"allow_privileged": false, "allow_rollback": true}, "files": %s}`+"\n", *env, list)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fail(err)
		}
		for n, data := range extra {
			p := filepath.Join(dir, n)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				fail(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				fail(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "bundle.json"), []byte(meta), 0o644); err != nil {
			fail(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), c.Compose(), 0o644); err != nil {
			fail(err)
		}
		fmt.Printf("%s\t%s\t%s\n", c.Name, c.About, dir)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen:", err)
	os.Exit(1)
}
