package redact

import "strings"

// Token shapes masked whether or not the value was ever registered:
//
//	hvs.… hvb.… hvr.…        Vault/OpenBao tokens: the prefix and 8+ of [A-Za-z0-9_-]
//	s.… b.… r.…              legacy tokens: a lone letter, a dot and 20+ of [A-Za-z0-9]
//	                         (the long run keeps "s.t", "b.txt" and host names intact)
//	eyJ….….…                 JWTs (and JWEs): base64url segments joined by dots
//	Authorization: Bearer v  the value after the scheme; the words themselves stay
//	X-Vault-Token: v         the value
//
// Header names match in any case and with the separators of HTTP dumps, JSON and Go maps
// (`: `, `":"`, `=`, `:[`).

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isB64URL(c byte) bool { return isAlnum(c) || c == '-' || c == '_' }

func run(s string, i int, ok func(byte) bool) int {
	n := 0
	for i+n < len(s) && ok(s[i+n]) {
		n++
	}
	return n
}

// appendShapes appends the token shapes in s; lower is asciiLower(s).
func appendShapes(sp []span, s, lower string) []span {
	sp = appendDotTokens(sp, s)
	sp = appendJWTs(sp, s)
	sp = appendHeader(sp, s, lower, "authorization", true)
	sp = appendHeader(sp, s, lower, "x-vault-token", false)
	return sp
}

func appendDotTokens(sp []span, s string) []span {
	for off := 0; ; {
		d := strings.IndexByte(s[off:], '.')
		if d < 0 {
			return sp
		}
		d += off
		off = d + 1
		if d >= 3 && s[d-3] == 'h' && s[d-2] == 'v' && (s[d-1] == 's' || s[d-1] == 'b' || s[d-1] == 'r') {
			if n := run(s, d+1, isB64URL); n >= 8 {
				sp = append(sp, span{d - 3, d + 1 + n})
				off = d + 1 + n
				continue
			}
		}
		if d >= 1 && (s[d-1] == 's' || s[d-1] == 'b' || s[d-1] == 'r') && (d == 1 || !isAlnum(s[d-2])) {
			if n := run(s, d+1, isAlnum); n >= 20 {
				sp = append(sp, span{d - 1, d + 1 + n})
				off = d + 1 + n
			}
		}
	}
}

func appendJWTs(sp []span, s string) []span {
	for off := 0; ; {
		i := strings.Index(s[off:], "eyJ")
		if i < 0 {
			return sp
		}
		i += off
		off = i + 3
		end := i + run(s, i, isB64URL)
		if end-i < 10 || end >= len(s) || s[end] != '.' {
			continue
		}
		n := run(s, end+1, isB64URL)
		if n < 4 || end+1+n >= len(s) || s[end+1+n] != '.' {
			continue
		}
		end += 1 + n
		// The signature (possibly empty), then any further JWE segments.
		for end < len(s) && s[end] == '.' {
			end += 1 + run(s, end+1, isB64URL)
		}
		sp = append(sp, span{i, end})
		off = end
	}
}

// asciiLower lower-cases ASCII letters only, so that offsets in the result are offsets in s.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

func isValueByte(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '"', '\'', '`', '\\', ',', ']', '}', ')', ';', '<', '>':
		return false
	}
	return true
}

// isScheme reports whether w is an HTTP auth scheme, kept in front of the masked credential.
func isScheme(w string) bool {
	switch strings.ToLower(w) {
	case "bearer", "basic", "negotiate", "digest", "token":
		return true
	}
	return false
}

// appendHeader masks the value after a header name. With scheme, a leading auth scheme (Bearer,
// Basic) is kept and the credential after it masked.
func appendHeader(sp []span, s, lower, name string, scheme bool) []span {
	for off := 0; ; {
		i := strings.Index(lower[off:], name)
		if i < 0 {
			return sp
		}
		i += off
		off = i + len(name)
		if i > 0 && (isAlnum(s[i-1]) || s[i-1] == '-') {
			continue
		}
		j, sep := off, false
		for j < len(s) && j-off < 8 && strings.IndexByte("\"':= \t[\\", s[j]) >= 0 {
			sep = sep || s[j] == ':' || s[j] == '='
			j++
		}
		if !sep {
			continue
		}
		w1 := run(s, j, isValueByte)
		if w1 == 0 {
			continue
		}
		if !scheme {
			sp = append(sp, span{j, j + w1})
			off = j + w1
			continue
		}
		if isScheme(s[j : j+w1]) {
			k := j + w1 + run(s, j+w1, func(c byte) bool { return c == ' ' })
			if w2 := run(s, k, isValueByte); k > j+w1 && w2 > 0 {
				sp = append(sp, span{k, k + w2})
				off = k + w2
			}
			continue // a scheme with nothing after it
		}
		sp = append(sp, span{j, j + w1})
		off = j + w1
	}
}
