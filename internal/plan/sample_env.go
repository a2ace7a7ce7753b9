package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/steward-evals/steward/internal/evalset"
)

// sampleEnvParts is what a sample with its own environment (a Harbor
// task's) adds to its fingerprint: its sandbox's resources and network,
// its timeouts, its verifier (mode, env, every file of tests/) and its
// reference solution. Nil for an ordinary sample, whose fingerprint stays
// as it was.
func sampleEnvParts(s *evalset.Sample) map[string]any {
	if s.Sandbox == nil && s.Harbor == nil && s.Timeout == 0 && s.ScorerTimeout == 0 {
		return nil
	}
	m := map[string]any{"timeout": s.Timeout, "scorer_timeout": s.ScorerTimeout, "build_timeout": s.BuildTimeout}
	if sb := s.Sandbox; sb != nil {
		m["sandbox"] = map[string]any{"cpus": sb.CPUs, "memory": sb.Memory, "disk": sb.Disk, "pids": sb.PIDs,
			"network": sb.Network, "cap_add": sb.CapAdd, "workdir": sb.Workdir, "build_network": sb.BuildNetwork}
	}
	if h := s.Harbor; h != nil {
		m["harbor"] = map[string]any{"env": h.Env, "verifier_mode": h.VerifierMode, "verifier_env": h.VerifierEnv,
			"tests": harborHashes(h.Tests), "solution": harborHashes(h.Solution), "solution_env": h.SolutionEnv}
		if h.KeepProcesses && h.VerifierMode == "shared" {
			// The verifier runs beside what the agent left running (a
			// separate one never does; without it the fingerprint stays
			// what it was when the agent's processes were always ended).
			m["harbor"].(map[string]any)["keep_processes"] = true
		}
		if len(h.AllowedHosts) > 0 {
			// A network allowlist: what the sandbox may reach decides outcomes.
			m["harbor"].(map[string]any)["allowed_hosts"] = h.AllowedHosts
		}
		if h.Compose != "" {
			// A compose environment: main's Dockerfile and every other
			// service as configured (their build contexts are hashed with the image).
			m["harbor"].(map[string]any)["compose"] = map[string]any{"dockerfile": h.Dockerfile, "services": h.Services}
		}
	}
	return m
}

func harborHashes(m map[string]evalset.HarborFile) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, f := range m {
		h := sha256.Sum256(f.Data)
		out[k] = fmt.Sprintf("%o:%s", f.Mode, hex.EncodeToString(h[:16]))
	}
	return out
}

// sampleImageFingerprint is the image part of a sample with its own
// sandbox: its build context's content hash, or its image reference
// (resolved to an ID by SetImageIDs); ok false for a sample that runs in
// its task's image.
func sampleImageFingerprint(s *evalset.Sample) (string, bool, error) {
	sb := s.Sandbox
	if sb == nil || (sb.Build == "" && sb.Image == "") {
		return "", false, nil
	}
	if sb.Build != "" {
		h, err := DirHash(sb.Build)
		if err != nil {
			return "", false, fmt.Errorf("fingerprint build context of sample %s: %w", s.ID, err)
		}
		return "build:" + h + servicesFingerprint(s), true, nil
	}
	return "image:" + sb.Image + servicesFingerprint(s), true, nil
}

// servicesFingerprint adds the build contexts of a compose environment's
// other services (their configuration is in sampleEnvParts).
func servicesFingerprint(s *evalset.Sample) string {
	if s.Harbor == nil {
		return ""
	}
	out := ""
	for _, svc := range s.Harbor.Services {
		if svc.Build == "" {
			out += "+" + svc.Name + "=image:" + svc.Image
			continue
		}
		h, err := DirHash(svc.Build)
		if err != nil {
			h = "unreadable:" + err.Error()
		}
		out += "+" + svc.Name + "=build:" + h
	}
	return out
}

// imageRef is the image reference an attempt runs in when it names one
// (not a build): the sample's own, else its task's.
func imageRef(t *evalset.Task, s *evalset.Sample) string {
	if sb := s.Sandbox; sb != nil && (sb.Build != "" || sb.Image != "") {
		if sb.Build != "" {
			return ""
		}
		return sb.Image
	}
	if t.Sandbox.Build != "" {
		return ""
	}
	return t.Sandbox.Image
}
