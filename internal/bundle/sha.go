package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// Sha is tenancy's bundle sha: for every regular file (bundle.json included) the line
// "<hex sha256 of its bytes>  <path>\n", sorted by path in byte order, and the hex sha256
// of their concatenation — what `sha256sum` over the sorted file list prints, hashed again.
func Sha(files map[string][]byte) string {
	sums := make(map[string][sha256.Size]byte, len(files))
	for p, data := range files {
		sums[p] = sha256.Sum256(data)
	}
	return ShaOfSums(sums)
}

// ShaOfSums is Sha of the files whose sha256 sums are sums: a reader that streams large files
// hashes each as it goes.
func ShaOfSums(sums map[string][sha256.Size]byte) string {
	paths := make([]string, 0, len(sums))
	for p := range sums {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		sum := sums[p]
		b.WriteString(hex.EncodeToString(sum[:]))
		b.WriteString("  ")
		b.WriteString(p)
		b.WriteByte('\n')
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// ShaLen is the length of a bundle sha: 64 lowercase hex characters.
const ShaLen = 64

// ValidSha reports whether s is a bundle sha as the agent accepts it from tenancy or reads it
// back from its own files: exactly 64 lowercase hex characters. Every comparison of shas is
// made on strings that passed this check, so they compare byte for byte.
func ValidSha(s string) bool {
	if len(s) != ShaLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ShaProblem says what is wrong with a string that is not a valid sha, without quoting it:
// its length, or the kind and position of the first byte that is not lowercase hex.
func ShaProblem(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9' || c >= 'a' && c <= 'f':
			continue
		case c >= 'A' && c <= 'F':
			return fmt.Sprintf("uppercase hex at byte %d", i)
		case c < 0x20 || c == 0x7f:
			return fmt.Sprintf("a control character at byte %d", i)
		default:
			return fmt.Sprintf("a non-hex byte at byte %d", i)
		}
	}
	if len(s) != ShaLen {
		return fmt.Sprintf("%d characters", len(s))
	}
	return "valid"
}
