package sim

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// LoadSecrets writes the secrets of a secrets.json into the env's KV: an object mapping each
// name to either one version ({"value": "…", …}) or a list of versions, oldest first.
// Values must be strings.
func (s *Sim) LoadSecrets(envID string, raw []byte) error {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("secrets.json: %w", err)
	}
	names := make([]string, 0, len(doc))
	for n := range doc {
		names = append(names, n)
	}
	sort.Strings(names)
	parsed := make(map[string][]map[string]string, len(doc))
	for _, n := range names {
		var one map[string]string
		if err := json.Unmarshal(doc[n], &one); err == nil {
			parsed[n] = []map[string]string{one}
			continue
		}
		var many []map[string]string
		if err := json.Unmarshal(doc[n], &many); err != nil {
			return fmt.Errorf("secrets.json: %s: want an object of strings or a list of them", n)
		}
		parsed[n] = many
	}
	for _, n := range names {
		for _, v := range parsed[n] {
			s.PutSecret(envID, n, v)
		}
	}
	return nil
}

// LoadReleasesDir adds every subdirectory of dir as a release of envID named after it, and
// loads dir/secrets.json into KV when it exists. It returns release name → sha.
func (s *Sim) LoadReleasesDir(envID, dir string) (map[string]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("releases: %w", err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sha, err := s.AddReleaseDir(envID, e.Name(), filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = sha
	}
	raw, err := os.ReadFile(filepath.Join(dir, "secrets.json"))
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return nil, fmt.Errorf("releases: %w", err)
	default:
		if err := s.LoadSecrets(envID, raw); err != nil {
			return nil, err
		}
	}
	return out, nil
}
