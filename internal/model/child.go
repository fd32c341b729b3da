package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/tikali/monky-deployd/internal/budget"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// A release's model is loaded only in the agent's binary re-executed as a loader child the
// operating system bounds (internal/budget), by one versioned op whatever is wanted of it: the
// check before the lease asks for the policy's findings on a scratch copy of the bundle with
// placeholders for the secrets (WantCheck, isolate.go); the stage for the policy's verdict, the
// resolved model and its services on the release written with its rendered `.env` (WantStage);
// the release GC for the images its services name (WantImages). The secrets reach the child on
// its stdin, never its environment or a file.

// op is the child's op name (budget.Serve); version the version of its request and answer: a
// child of another version is budget.ErrUnavailable, never a verdict.
const (
	op      = "compose-model"
	version = 4
)

// What a Request wants of the loaded model.
const (
	WantCheck  = "check"
	WantStage  = "stage"
	WantImages = "images"
)

// Request is a load of a release's compose file ComposeFile. WantStage and WantImages load the
// release written at Rel (symlinks resolved), whose compose file's verified bytes are Content,
// with the rendered `.env` Env, as project Project. WantCheck loads the scratch copy at Root.
type Request struct {
	V               int    `json:"v"`
	Want            string `json:"want"`
	ComposeFile     string `json:"compose_file"`
	Rel             string `json:"rel,omitempty"`
	Content         []byte `json:"content,omitempty"`
	Env             []byte `json:"env,omitempty"`
	Project         string `json:"project,omitempty"`
	AllowPrivileged bool   `json:"allow_privileged,omitempty"`
	// WantCheck: Root is the scratch copy's release directory, Private its private parent,
	// Names the files written below Root (the bundle's files never cross), Withheld the files
	// not written and why; Template the bundle's `.env.template`; EnvID the box's env.
	Root     string            `json:"root,omitempty"`
	Private  string            `json:"private,omitempty"`
	Names    []string          `json:"names,omitempty"`
	Withheld map[string]string `json:"withheld,omitempty"`
	Template []byte            `json:"template,omitempty"`
	EnvID    string            `json:"env_id,omitempty"`
	Compose  ComposeEnv        `json:"compose"`
}

// Answer is the child's: a verdict (Code, with the typed Reason behind it and the Detail), or
// what was wanted.
type Answer struct {
	V      int          `json:"v"`
	Code   vocab.Code   `json:"code,omitempty"`
	Reason vocab.Reason `json:"reason,omitempty"`
	Detail string       `json:"detail,omitempty"`
	// WantStage: the resolved model and the services the health gate judges.
	Model    []byte    `json:"model,omitempty"`
	Services []Service `json:"services,omitempty"`
	// WantImages: each service's image, of every profile, in the services' name order.
	Images []ServiceImage `json:"images,omitempty"`
	// WantCheck: the policy's findings, and whether every one is a field the allowlist does not
	// name.
	Findings []string `json:"findings,omitempty"`
	Unlisted bool     `json:"unlisted,omitempty"`
}

// ServiceImage is the image a service names, as written.
type ServiceImage struct {
	Service string `json:"service"`
	Image   string `json:"image"`
}

func init() { budget.Serve(op, serve) }

// serve is the child: load, then decide and resolve (WantStage) or list the images (WantImages).
func serve(raw []byte) ([]byte, error) {
	var req Request
	if err := budget.Decode(raw, &req, version); err != nil {
		return nil, err
	}
	if req.Want == WantCheck {
		ans, err := serveCheck(req)
		if err != nil {
			return nil, err
		}
		return json.Marshal(ans)
	}
	ans := Answer{V: version}
	p, err := Load(context.Background(), req.Rel, req.ComposeFile, req.Content, req.Env, req.Project)
	switch {
	case err != nil:
		ans.Code, ans.Detail = vocab.BundleInvalid, err.Error()
	case req.Want == WantImages:
		ans.Images = Images(p)
	case req.Want != WantStage:
		return nil, errors.New("the loader is asked for " + req.Want)
	default:
		found := CheckModel(p, req.Rel, req.AllowPrivileged)
		if len(found) > 0 {
			words := make([]string, 0, len(found))
			for _, f := range found {
				words = append(words, f.String())
			}
			ans.Code, ans.Detail = vocab.PrivilegedRefused, strings.Join(words, "; ")+" (in the model compose would run; bundle.json agent.allow_privileged is not set)"
			if OnlyUnlisted(found) {
				ans.Reason = vocab.ReasonUnlistedField
			}
		} else if ans.Model, err = Resolve(p); err != nil {
			ans.Code, ans.Detail = vocab.BundleInvalid, err.Error()
		} else {
			ans.Services = ServicesOf(p)
		}
	}
	return json.Marshal(ans)
}

// Run has a bounded child load the release req names and answer what req wants. The error is
// the child's, as budget.Run gives it (*budget.Exceeded past a bound, budget.ErrCancelled,
// budget.ErrUnavailable), or an answer that does not read; a verdict is in the Answer.
func Run(ctx context.Context, req Request) (Answer, error) {
	req.V = version
	raw, err := json.Marshal(req)
	if err != nil {
		return Answer{}, err
	}
	defer clear(raw)
	out, err := budget.Run(ctx, op, raw)
	defer clear(out)
	if err != nil {
		return Answer{}, err
	}
	var ans Answer
	if err := json.Unmarshal(out, &ans); err != nil || ans.V != version {
		// not a verdict: the child that answered is not this binary's (an upgrade in progress)
		return Answer{}, fmt.Errorf("%w: its answer does not read", budget.ErrUnavailable)
	}
	return ans, nil
}

// Images is the image of every service of p that names one, of every profile, in the services'
// name order.
func Images(p *types.Project) []ServiceImage {
	var out []ServiceImage
	for _, ss := range []types.Services{p.Services, p.DisabledServices} {
		for name, s := range ss {
			if s.Image != "" {
				out = append(out, ServiceImage{Service: name, Image: s.Image})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Service < out[j].Service })
	return out
}
