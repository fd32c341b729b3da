package effects

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseRegistryAuth(t *testing.T) {
	cases := []struct {
		value, def string
		want       RegistryAuth
	}{
		{`{"registry":"harbor.tikali.net","username":"robot$monky","password":"p:w:d"}`, "other.example",
			RegistryAuth{Registry: "harbor.tikali.net", Username: "robot$monky", Password: "p:w:d"}},
		{` {"username":"robot","password":"pw"} `, "harbor.tikali.net", RegistryAuth{Registry: "harbor.tikali.net", Username: "robot", Password: "pw"}},
		{"robot$monky:pa:ss:word\n", "harbor.tikali.net", RegistryAuth{Registry: "harbor.tikali.net", Username: "robot$monky", Password: "pa:ss:word"}},
	}
	for _, c := range cases {
		got, err := ParseRegistryAuth(c.value, c.def)
		if err != nil || got != c.want {
			t.Errorf("ParseRegistryAuth(%q) = %+v, %v", c.value, got, err)
		}
	}
	const secret = "S3CRET-PASSWORD"
	bad := []struct{ value, def string }{
		{"", "h"}, {"   ", "h"}, {"no-colon-" + secret, "h"}, {":" + secret, "h"}, {"user:", "h"},
		{"user:" + secret, ""}, {`{"username":"u","password":"` + secret + `"`, "h"},
		{`{"username":"u"}`, "h"}, {`{"username":"u","password":"` + secret + `"}`, ""},
		{`{"username": 1, "password":"` + secret + `"}`, "h"},
	}
	for _, b := range bad {
		_, err := ParseRegistryAuth(b.value, b.def)
		if err == nil {
			t.Errorf("accepted %q", b.value)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "no-colon") {
			t.Errorf("error carries the value: %v", err)
		}
	}
	a := RegistryAuth{Registry: "h", Username: "u", Password: secret}
	for _, s := range []string{a.String(), fmt.Sprintf("%v %+v %#v %s", a, a, a, a)} {
		if strings.Contains(s, secret) {
			t.Errorf("formatting shows the password: %s", s)
		}
	}
}
