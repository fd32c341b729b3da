// Command monky-deployd is the on-box pull agent for Monky backend environments: each tick
// checks in with tenancy over the mesh and converges the box to what tenancy asks for.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}
