package explain

import (
	"fmt"
	"syscall"

	"github.com/tikali/monky-deployd/internal/vocab"
)

// minWritable is the free space under which the agent's own writes (a state file commit, a
// release's files) cannot be trusted to land: a box with less is STATE_UNWRITABLE.
const minWritable = 1 << 20

// stRdonly is ST_RDONLY of statfs(2)'s flags.
const stRdonly = 0x1

// Unwritable is what keeps the agent from writing its own files under dirs now — "" when
// nothing does: a file system mounted read-only, or less than 1 MiB free to an unprivileged
// user. A dir that does not exist yet is skipped (the tick makes it). Live readers (the tick,
// status, explain, the metrics) ask it through LimitsOf; a copy of a state file is not this box.
func Unwritable(dirs ...string) string {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		var st syscall.Statfs_t
		if err := syscall.Statfs(d, &st); err != nil {
			continue
		}
		if st.Flags&stRdonly != 0 {
			return d + ": the file system is mounted read-only"
		}
		if free := st.Bavail * uint64(st.Bsize); free < minWritable {
			return fmt.Sprintf("%s: no space left on the device (%d bytes free)", d, free)
		}
	}
	return ""
}

// unwritable is the why of a box whose own files cannot be written now (Limits.Unwritable): red
// at once, whatever the journal says, since a tick that cannot commit cannot journal it either.
func (in Input) unwritable(mk maker) *Why {
	if in.Limits.Unwritable == "" {
		return nil
	}
	w := mk(vocab.StateUnwritable, "", in.Limits.Unwritable,
		"every tick that writes fails until the file can be written; then the next tick goes on by itself", in.Now, in.newestTick())
	w.Since = in.Now.UTC()
	w.person = true
	return w
}
