package transport

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// The sdk transport treats the OpenZiti SDK as code that must not see input it was not written
// for: its identity loader dereferences nil on a key that is not a key, and its lazy loader ends
// the process on an error. So the identity file is read and checked here, completely, and the
// SDK is handed the checked bytes (never the path to read again).

// sdkIdentity is what the sdk transport takes from the identity file: the controller's URLs and
// the identity's certificate, key and CA as PEM text, each of them parsed once.
type sdkIdentity struct {
	ZtAPI       string
	ZtAPIs      []string
	ConfigTypes []string
	Cert        string // PEM: one or more CERTIFICATE blocks, the first the identity's own
	Key         string // PEM: the private key of Cert
	CA          string // PEM: the network's CA bundle
}

// identityFile is the shape of a ziti identity file as the SDK loads it (ziti.Config with
// identity.Config under "id"); other keys are the SDK's options and are ignored here as there.
type identityFile struct {
	ZtAPI       string   `json:"ztAPI"`
	ZtAPIs      []string `json:"ztAPIs"`
	ConfigTypes []string `json:"configTypes"`
	ID          *struct {
		Key  string `json:"key"`
		Cert string `json:"cert"`
		CA   string `json:"ca"`
	} `json:"id"`
}

// CheckSDKIdentity checks the identity at path as the sdk transport does before the SDK sees it
// (loadSDKIdentity): nil when the sdk transport would load it.
func CheckSDKIdentity(path string) error {
	_, err := loadSDKIdentity(path)
	return err
}

// loadSDKIdentity reads and checks the identity at path for the sdk transport. What keeps the
// agent from the file is IDENTITY_UNUSABLE (readIdentity); a file that is group- or
// world-writable, is not the JSON of an identity, or whose certificate, key or CA does not parse
// (or the key is not the certificate's) is TRANSPORT_IDENTITY. The words name keys, offsets and
// paths, never the file's content.
func loadSDKIdentity(path string) (*sdkIdentity, error) {
	raw, mode, err := readIdentity(config.TransportSDK, path)
	if err != nil {
		return nil, err
	}
	fail := func(format string, a ...any) error {
		return &Error{Op: "transport sdk", Code: vocab.TransportIdentity,
			Msg: fmt.Sprintf("identity %s ", path) + fmt.Sprintf(format, a...), Hint: identityHint}
	}
	if w := mode.Perm() & 0o022; w != 0 {
		who := "group"
		if w&0o002 != 0 {
			who = "world"
		}
		return nil, &Error{Op: "transport sdk", Code: vocab.TransportIdentity,
			Msg:  fmt.Sprintf("identity %s is %s-writable (mode %04o): whoever can write it can replace the box's identity", path, who, mode.Perm()),
			Hint: fmt.Sprintf("chmod go-w %s", path)}
	}
	var f identityFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fail("is not a ziti identity (%s)", jsonFault(raw, err))
	}
	apis := f.ZtAPIs
	if len(apis) == 0 && f.ZtAPI != "" {
		apis = []string{f.ZtAPI}
	}
	if len(apis) == 0 {
		return nil, fail("is not a ziti identity (no `ztAPI`: the controller's URL)")
	}
	for _, a := range apis {
		if u, err := url.Parse(a); err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fail("is not a ziti identity (`ztAPI` is not an https URL)")
		}
	}
	if f.ID == nil {
		return nil, fail("is not a ziti identity (no `id` object: the certificate, key and CA)")
	}
	id := &sdkIdentity{ZtAPI: f.ZtAPI, ZtAPIs: f.ZtAPIs, ConfigTypes: f.ConfigTypes}
	for _, p := range []struct {
		key, value string
		to         *string
	}{{"id.cert", f.ID.Cert, &id.Cert}, {"id.key", f.ID.Key, &id.Key}, {"id.ca", f.ID.CA, &id.CA}} {
		if p.value == "" {
			return nil, fail("has no `%s`", p.key)
		}
		text, err := identityPEM(p.value)
		if err != nil {
			return nil, fail("`%s`: %v", p.key, err)
		}
		*p.to = text
	}
	certs, err := pemCertificates([]byte(id.Cert))
	if err != nil {
		return nil, fail("`id.cert`: %v", err)
	}
	if err := pemPrivateKey([]byte(id.Key)); err != nil {
		return nil, fail("`id.key`: %v", err)
	}
	if _, err := tls.X509KeyPair([]byte(id.Cert), []byte(id.Key)); err != nil {
		return nil, fail("`id.key` is not the private key of `id.cert` (%s)", certs[0].Subject.CommonName)
	}
	if _, err := pemCertificates([]byte(id.CA)); err != nil {
		return nil, fail("`id.ca`: %v", err)
	}
	return id, nil
}

// identityHint is what to do about a TRANSPORT_IDENTITY the check finds.
const identityHint = "the file is 0600 (monky-deployd enroll) or the tunneller's 0640 ziti:ziti enrolment; if it was damaged, enrol the box again from a fresh enrolment JWT: monky-deployd enroll --force --jwt FILE"

// jsonFault says where raw stops being the JSON of an identity.
func jsonFault(raw []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case len(bytes.TrimSpace(raw)) == 0:
		return "empty file"
	case errors.As(err, &se) && se.Offset >= int64(len(raw)):
		return fmt.Sprintf("not JSON: it ends at byte %d, cut short", len(raw))
	case errors.As(err, &se):
		return fmt.Sprintf("not JSON: syntax error at byte %d", se.Offset)
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("`%s` is a JSON %s, not a %s", te.Field, te.Value, te.Type)
	}
	return "not a JSON object"
}

// identityPEM is the PEM text an identity value names: inline (`pem:…` or the PEM itself) or a
// file (`file://…`, `file:…` or a path), read as this user. Key stores (pkcs11, parsec, …) are
// refused: the agent does not load them.
func identityPEM(v string) (string, error) {
	if after, ok := strings.CutPrefix(v, "pem:"); ok {
		return after, nil
	}
	if strings.HasPrefix(v, "-----BEGIN") {
		return v, nil
	}
	u, err := url.Parse(v)
	if err != nil {
		return "", errors.New("neither PEM nor a file name")
	}
	path := v
	switch u.Scheme {
	case "":
	case "file":
		path = u.Path
		if path == "" {
			path = u.Opaque
		}
	default:
		return "", fmt.Errorf("names a key store (%s:) the agent does not load", u.Scheme)
	}
	// a FIFO or a device would hang the read or feed it without end: only a regular file is read
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return "", fmt.Errorf("names %s, which is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("names %s, which does not exist", path)
		}
		return "", fmt.Errorf("names %s, which is unreadable: %v", path, errors.Unwrap(err))
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxIdentityBytes+1))
	if err != nil || len(raw) > maxIdentityBytes {
		return "", fmt.Errorf("names %s, which is unreadable or larger than %d bytes", path, maxIdentityBytes)
	}
	return string(raw), nil
}

// pemCertificates are the CERTIFICATE blocks of text; an error when there is none or one does
// not parse.
func pemCertificates(text []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for n := 1; ; n++ {
		var b *pem.Block
		b, text = pem.Decode(text)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d is not a certificate that parses", n)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("holds no PEM certificate")
	}
	return certs, nil
}

// pemPrivateKey checks that text's first PEM block is a private key of a kind the SDK loads
// (EC, PKCS#1 RSA or PKCS#8) and that it parses.
func pemPrivateKey(text []byte) error {
	b, _ := pem.Decode(text)
	if b == nil {
		return errors.New("holds no PEM block: it is not a key")
	}
	var err error
	switch b.Type {
	case "EC PRIVATE KEY":
		_, err = x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		_, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	case "PRIVATE KEY":
		_, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	default:
		return fmt.Errorf("its PEM block is a %q, not a private key", b.Type)
	}
	if err != nil {
		return fmt.Errorf("its %s does not parse", strings.ToLower(b.Type))
	}
	return nil
}
