package model

import (
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// Service is what the health gate needs to know of a service of the checked model: its name,
// whether it is a one-shot (restart "no" or on-failure: exiting 0 completes it), whether the
// engine never restarts it (restart "no": an exit is final), and how many containers it runs
// (0: none is expected).
type Service struct {
	Name      string `json:"name"`
	OneShot   bool   `json:"one_shot,omitempty"`
	NoRestart bool   `json:"no_restart,omitempty"`
	Replicas  int    `json:"replicas"`
}

// ServicesOf are the services compose runs of p, sorted by name (the loader child computes
// them with the resolved model; the gate and every heartbeat judge the containers by them).
func ServicesOf(p *types.Project) []Service {
	out := make([]Service, 0, len(p.Services))
	for name, s := range p.Services {
		sv := Service{Name: name, Replicas: 1}
		restart := s.Restart
		if s.Deploy != nil && s.Deploy.RestartPolicy != nil && s.Deploy.RestartPolicy.Condition != "" {
			restart = s.Deploy.RestartPolicy.Condition
		}
		switch {
		case restart == "", restart == types.RestartPolicyNo, restart == "none":
			sv.OneShot, sv.NoRestart = true, true
		case strings.HasPrefix(restart, types.RestartPolicyOnFailure):
			sv.OneShot = true
		}
		if s.Scale != nil {
			sv.Replicas = *s.Scale
		}
		if s.Deploy != nil && s.Deploy.Replicas != nil {
			sv.Replicas = *s.Deploy.Replicas
		}
		out = append(out, sv)
	}
	slices.SortFunc(out, func(a, b Service) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ServicesPath is where the services of the release directory rel's model are kept:
// <deploy_dir>/resolved/<sha>.services.json, beside the model.
func ServicesPath(rel string) string {
	return strings.TrimSuffix(ModelPath(rel), ".yaml") + ".services.json"
}
