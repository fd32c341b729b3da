package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
)

// Sha is tenancy's bundle sha: for every regular file (bundle.json included) the line
// "<hex sha256 of its bytes>  <path>\n", sorted by path in byte order, and the hex sha256
// of their concatenation — what `sha256sum` over the sorted file list prints, hashed again.
func Sha(files map[string][]byte) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		sum := sha256.Sum256(files[p])
		b.WriteString(hex.EncodeToString(sum[:]))
		b.WriteString("  ")
		b.WriteString(p)
		b.WriteByte('\n')
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}
