package kubeconf

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/steward-evals/steward/internal/sandbox"
)

// Key is the section's name in _steward.yaml.
const Key = "kubernetes"

func init() {
	sandbox.RegisterSection(sandbox.Section{
		Key:   Key,
		New:   func() any { return &Settings{} },
		Check: check,
		Value: func(s any) any { return *s.(*Settings) },
		Flags: []sandbox.SectionFlag{{
			Name:  "kubeconfig",
			Usage: "kubeconfig for provider: kubernetes (wins over KUBECONFIG and _steward.yaml)",
			Apply: func(s any, v string) error {
				abs, err := filepath.Abs(v)
				if err != nil || strings.TrimSpace(v) == "" {
					return fmt.Errorf("must name a file")
				}
				k := s.(*Settings)
				k.Kubeconfig, k.KubeconfigFromFlag = abs, true
				return nil
			},
		}},
	})
}

// check judges the section and resolves its kubeconfig against dir.
func check(s any, dir string) []sandbox.Problem {
	k := s.(*Settings)
	var out []sandbox.Problem
	switch k.ImagePullPolicy {
	case "", "Always", "IfNotPresent", "Never":
	default:
		out = append(out, sandbox.Problem{Field: "image_pull_policy", Message: fmt.Sprintf("must be Always, IfNotPresent or Never, got %q", k.ImagePullPolicy)})
	}
	if k.Kubeconfig != "" && !filepath.IsAbs(k.Kubeconfig) {
		k.Kubeconfig = filepath.Join(dir, k.Kubeconfig)
	}
	return out
}
