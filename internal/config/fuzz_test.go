package config

import "testing"

// FuzzParse: Parse never panics, and whatever it accepts is a usable config.
func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(minimal + "tenancy:\n  base_url: https://t.example\nlog_level: warn\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if c != nil {
				t.Fatalf("error %v with a non-nil config", err)
			}
			return
		}
		if c.EnvID == "" || c.DeployDir == "" || c.ComposeProject == "" {
			t.Fatalf("accepted config without env_id/deploy_dir/project: %+v", c)
		}
		if c.Tenancy.Port < 1 || c.Tenancy.Port > 65535 || c.Tenancy.Host == "" {
			t.Fatalf("accepted config with tenancy %+v", c.Tenancy)
		}
		if h, p := c.BaoHostPort(); h == "" || p < 1 {
			t.Fatalf("accepted bao.addr %q gives %q %d", c.Bao.Addr, h, p)
		}
	})
}
