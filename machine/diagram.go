package machine

import (
	"fmt"
	"strings"
)

// Mermaid draws the transition table as a mermaid stateDiagram. docs/MACHINE.md embeds it and
// a test fails when the two drift; `monky-deployd diagram` prints it.
func Mermaid() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	fmt.Fprintf(&b, "    [*] --> %s\n", Idle)
	for _, ev := range Table {
		for _, src := range ev.Src {
			fmt.Fprintf(&b, "    %s --> %s: %s\n", src, ev.Dst, ev.Name)
		}
	}
	return b.String()
}
