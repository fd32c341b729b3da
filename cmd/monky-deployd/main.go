// Command monky-deployd is the on-box pull agent for Monky backend environments: each tick
// checks in with tenancy over the mesh and converges the box to what tenancy asks for.
package main

import (
	"os"

	"github.com/tikali/monky-deployd/internal/phase"
)

func main() {
	phase.Begin()
	code := run(os.Args, os.Stdout, os.Stderr)
	phase.Mark("exit")
	phase.Print(os.Stderr)
	os.Exit(code)
}
