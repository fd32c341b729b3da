//go:build !unix

package logging

import "os"

// devIno: there is no journald off unix.
func devIno(os.FileInfo) (string, bool) { return "", false }
