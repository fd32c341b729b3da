// Command gen writes issue 37's hostile cost classes (package hostile) as unpacked bundle
// directories, one a class, for `make bench`: <out>/<case>/{bundle.json,compose.yaml}.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

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
		meta := fmt.Sprintf(`{"env_id": %q, "compose_file": "compose.yaml", "agent": {"allow_privileged": false, "allow_rollback": true}, "files": ["compose.yaml"]}`+"\n", *env)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fail(err)
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
