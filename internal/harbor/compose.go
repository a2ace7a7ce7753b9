package harbor

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"

	"github.com/steward-evals/steward/internal/sandbox"
)

// Compose environments (environment/docker-compose.yaml): the file is read
// with github.com/compose-spec/compose-go/v2 (the compose specification's
// own loader: schema validation, interpolation, normalization). Before it,
// every key is checked against what Steward honours, so a key it cannot
// honour is a load error at its file, line and key rather than a project
// that runs differently from Harbor's. The lines come from gopkg.in/yaml.v3's
// node tree of the same file.

// MainService is the compose service the agent and the verifier run in.
const MainService = "main"

// composeTop are the top-level keys Steward reads (x- extensions are ignored).
var composeTop = map[string]string{
	"services": "",
	"name":     "",
	"version":  "",
}

// composeRefused are service keys refused with a reason of their own.
var composeRefused = map[string]string{
	"privileged":     "privileged containers are refused: a service gets no more privilege than Steward's sandboxes (all capabilities dropped unless cap_add names some, no-new-privileges)",
	"network_mode":   "a service's network_mode is refused (host, another container's or none): every service is on the attempt's own network",
	"pid":            "sharing the host's (or another container's) PID namespace is refused",
	"ipc":            "sharing the host's (or another container's) IPC namespace is refused",
	"uts":            "sharing the host's UTS namespace is refused",
	"userns_mode":    "userns_mode is refused",
	"cgroup":         "cgroup is refused",
	"ports":          "publishing ports on the host is refused: services reach each other by name on the attempt's own network, and nothing of an attempt listens on the host",
	"volumes":        "volumes are not supported: bind mounts of host paths are refused (a task directory is untrusted) and named volumes shared between services are not supported yet",
	"volumes_from":   "volumes_from is not supported",
	"devices":        "devices are refused",
	"security_opt":   "security_opt is refused: every service runs with no-new-privileges and Docker's default profiles",
	"cap_drop":       "",
	"env_file":       "env_file is not supported: it reads files Steward does not snapshot; write the variables under environment",
	"extends":        "extends is not supported: write the service out",
	"container_name": "container_name is refused: Steward names every container of a run (several attempts run at once)",
	"networks":       "networks other than the attempt's own are not supported: drop networks (every service is on one network, reachable by its name)",
	"profiles":       "profiles are not supported: every service of the file is started",
	"secrets":        "secrets are not supported",
	"configs":        "configs are not supported",
	"sysctls":        "sysctls are refused",
	"ulimits":        "ulimits are not supported",
	"extra_hosts":    "extra_hosts is not supported",
	"dns":            "dns is not supported",
	"platform":       "platform is not supported: services run on the daemon's platform",
	"runtime":        "runtime is refused",
	"gpus":           "GPUs are not supported",
	"links":          "links are not needed: services reach each other by name",
	"external_links": "external_links are refused",
	"pull_policy":    "",
}

// composeService are the service keys Steward honours (or ignores harmlessly).
var composeService = map[string]bool{
	"image": true, "build": true, "environment": true, "command": true, "entrypoint": true,
	"healthcheck": true, "depends_on": true, "cpus": true, "mem_limit": true, "deploy": true,
	"cap_add": true, "working_dir": true, "user": true, "expose": true, "init": true,
	"restart": true, "stdin_open": true, "tty": true, "labels": true, "hostname": true,
}

// loadCompose reads environment/<name> into t: main's image or build,
// environment and working_dir, and the other services. dockerImage is
// [environment] docker_image, which replaces main's image or build.
func loadCompose(r *Result, t *Task, envDir, name, display, dockerImage string) {
	file := filepath.Join(display, "environment", name)
	bad := func(key string, line int, format string, args ...any) {
		r.add(Problem{File: file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	warn := func(key string, line int, format string, args ...any) {
		r.add(Problem{File: file, Line: line, Key: key, Warning: true, Msg: fmt.Sprintf(format, args...)})
	}
	// checkCondition refuses a depends_on condition Steward cannot wait for.
	checkCondition := func(key string, line int, dep string, cond string) {
		switch cond {
		case "", types.ServiceConditionStarted, types.ServiceConditionHealthy:
		default:
			bad(key, line, "condition %q of %s is not supported (use service_started or service_healthy)", cond, dep)
		}
	}
	if st, err := os.Lstat(envDir); err != nil || st.Mode()&fs.ModeSymlink != 0 || !st.IsDir() {
		r.add(Problem{File: filepath.Join(display, "environment"), Msg: "must be a directory (not a link)"})
		return
	}
	data, _, msg := readRegular(filepath.Join(envDir, name), MaxTOMLSize)
	if msg != "" {
		r.add(Problem{File: file, Msg: msg})
		return
	}
	t.Compose = file
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		bad("", 0, "invalid YAML: %v", err)
		return
	}
	before := len(r.Errs())
	checkComposeKeys(&doc, bad, warn)
	if len(r.Errs()) > before {
		return
	}
	var unset []string
	proj, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  envDir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(envDir, name), Content: data}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) {
		o.SetProjectName("harbor", true)
		o.SkipInclude = true
		o.SkipExtends = true
		o.ResolvePaths = true
		if o.Interpolate != nil {
			o.Interpolate.LookupValue = func(k string) (string, bool) {
				unset = append(unset, k)
				return "", false
			}
		}
	})
	if err != nil {
		bad("", 0, "invalid compose file: %v", err)
		return
	}
	for _, k := range uniq(unset) {
		warn("", 0, "${%s}: Steward reads no host variables into a compose file: it is empty (or its :- default)", k)
	}
	main, ok := proj.Services[MainService]
	if !ok {
		bad("services", line(&doc, "services"), "no service main: main is the service the agent and the verifier run in")
		return
	}
	sk := func(svc, key string) (string, int) {
		return "services." + svc + "." + key, line(&doc, "services", svc, key)
	}
	// main: the sandbox itself.
	switch {
	case dockerImage != "":
		t.Image = dockerImage
	case main.Build != nil:
		t.Build, t.Dockerfile = composeBuild(t, main, sk, bad)
	case main.Image != "":
		t.Image = main.Image
	default:
		k, l := sk(MainService, "image")
		bad(k, l, "main has neither image nor build")
	}
	env := composeEnv(MainService, main.Environment, sk, bad)
	if t.Env == nil {
		t.Env = map[string]string{}
	}
	for k, v := range env {
		if _, set := t.Env[k]; !set {
			t.Env[k] = v
		}
	}
	if t.Workdir == "" && main.WorkingDir != "" {
		t.Workdir = main.WorkingDir
	}
	for _, k := range []string{"command", "entrypoint"} {
		if key, l := sk(MainService, k); l > 0 {
			warn(key, l, "not run: main runs Steward's idle process, and the agent and the verifier are run in it (as for a Dockerfile task)")
		}
	}
	if key, l := sk(MainService, "healthcheck"); l > 0 {
		warn(key, l, "not waited for: main's own command is not started; the other services' health checks are")
	}
	for _, k := range []string{"cpus", "mem_limit", "deploy"} {
		if key, l := sk(MainService, k); l > 0 {
			warn(key, l, "ignored: main's resources are task.toml's [environment] cpus and memory_mb")
		}
	}
	if key, l := sk(MainService, "cap_add"); l > 0 {
		bad(key, l, "main's capabilities are the Steward task's sandbox.cap_add (it applies to every sample): drop cap_add here")
	}
	if key, l := sk(MainService, "user"); l > 0 && main.User != "" && main.User != "root" && main.User != "0" {
		bad(key, l, "running main as another user is not supported yet (commands run as the image's user)")
	}
	// The other services, in name order.
	names := make([]string, 0, len(proj.Services))
	for n := range proj.Services {
		if n != MainService {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		s := proj.Services[n]
		svc := sandbox.Service{Name: n, Image: s.Image, Workdir: s.WorkingDir, User: s.User, CapAdd: s.CapAdd}
		for _, c := range s.CapAdd {
			if !defaultCaps[strings.TrimPrefix(strings.ToUpper(c), "CAP_")] {
				k, l := sk(n, "cap_add")
				bad(k, l, "capability %s is refused: a task directory is untrusted, so a service may add back only what Docker grants a container by default (%s)", c, strings.Join(sortedCaps(), ", "))
			}
		}
		if s.Build != nil {
			svc.Build, svc.Dockerfile = composeBuild(t, s, sk, bad)
			svc.Image = ""
		} else if s.Image == "" {
			k, l := sk(n, "image")
			bad(k, l, "the service has neither image nor build")
		}
		svc.Env = composeEnv(n, s.Environment, sk, bad)
		if s.Entrypoint != nil {
			svc.Entrypoint = append([]string{}, s.Entrypoint...)
		}
		if s.Command != nil {
			svc.Command = append([]string{}, s.Command...)
		}
		if hc := s.HealthCheck; hc != nil {
			h := &sandbox.Healthcheck{Test: append([]string{}, hc.Test...)}
			if hc.Disable {
				h.Test = []string{"NONE"}
			}
			dur := func(d *types.Duration) time.Duration {
				if d == nil {
					return 0
				}
				return time.Duration(*d)
			}
			h.Interval, h.Timeout, h.StartPeriod, h.StartInterval = dur(hc.Interval), dur(hc.Timeout), dur(hc.StartPeriod), dur(hc.StartInterval)
			if hc.Retries != nil {
				h.Retries = int(*hc.Retries)
			}
			if len(h.Test) == 0 {
				h = nil // inherits the image's test: compose-go keeps the timings only
			}
			svc.Healthcheck = h
		}
		if len(s.DependsOn) > 0 {
			svc.DependsOn = map[string]string{}
			for d, dep := range s.DependsOn {
				k, l := sk(n, "depends_on")
				checkCondition(k, l, d, dep.Condition)
				if d == MainService {
					bad(k, l, "no service can depend on main: main starts last, once the others are up")
				}
				svc.DependsOn[d] = cmp.Or(dep.Condition, types.ServiceConditionStarted)
			}
		}
		svc.CPUs = float64(s.CPUS)
		svc.Memory = int64(s.MemLimit)
		if s.Deploy != nil && s.Deploy.Resources.Limits != nil {
			if c := float64(s.Deploy.Resources.Limits.NanoCPUs); c > 0 && (svc.CPUs == 0 || c < svc.CPUs) {
				svc.CPUs = c
			}
			if m := int64(s.Deploy.Resources.Limits.MemoryBytes); m > 0 && (svc.Memory == 0 || m < svc.Memory) {
				svc.Memory = m
			}
		}
		if svc.CPUs < 0 || svc.CPUs > 1024 {
			k, l := sk(n, "cpus")
			bad(k, l, "must be more than 0 (at most 1024), got %v", svc.CPUs)
		}
		if svc.Memory != 0 && svc.Memory < 6<<20 {
			k, l := sk(n, "mem_limit")
			bad(k, l, "must be at least 6 MiB (Docker's minimum), got %d bytes", svc.Memory)
		}
		t.Services = append(t.Services, svc)
	}
	for d, dep := range main.DependsOn {
		k, l := sk(MainService, "depends_on")
		checkCondition(k, l, d, dep.Condition)
	}
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// composeBuild checks a service's build (a context inside the task
// directory, a Dockerfile that is a regular file in it) and returns the
// context (absolute) and the Dockerfile relative to it.
func composeBuild(t *Task, s types.ServiceConfig, sk func(string, string) (string, int), bad func(string, int, string, ...any)) (string, string) {
	k, l := sk(s.Name, "build")
	b := s.Build
	if len(b.Args) > 0 || len(b.Target) > 0 || len(b.AdditionalContexts) > 0 || len(b.Secrets) > 0 || b.Network != "" || len(b.CacheFrom) > 0 || b.DockerfileInline != "" || len(b.Platforms) > 0 || len(b.Tags) > 0 || len(b.SSH) > 0 {
		bad(k, l, "only build.context and build.dockerfile are supported")
		return "", ""
	}
	ctxDir := filepath.Clean(b.Context)
	if !filepath.IsAbs(ctxDir) || strings.Contains(b.Context, "://") {
		bad(k, l, "context %q must be a directory of the task", b.Context)
		return "", ""
	}
	root := filepath.Clean(t.Dir)
	if rel, err := filepath.Rel(root, ctxDir); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		bad(k, l, "context %q is outside the task directory: a build reads only the task's own files", b.Context)
		return "", ""
	}
	if st, err := os.Lstat(ctxDir); err != nil || st.Mode()&fs.ModeSymlink != 0 || !st.IsDir() {
		bad(k, l, "context %q must be a directory (not a link)", b.Context)
		return "", ""
	}
	df := b.Dockerfile
	if df == "" {
		df = "Dockerfile"
	}
	if filepath.IsAbs(df) {
		if rel, err := filepath.Rel(ctxDir, df); err == nil {
			df = rel
		}
	}
	df = filepath.ToSlash(filepath.Clean(df))
	if df == ".." || strings.HasPrefix(df, "../") || filepath.IsAbs(df) {
		bad(k, l, "dockerfile %q must be inside the build context", b.Dockerfile)
		return "", ""
	}
	if st, err := os.Lstat(filepath.Join(ctxDir, filepath.FromSlash(df))); err != nil || !st.Mode().IsRegular() {
		bad(k, l, "dockerfile %q must be a regular file (not a link) in the build context", df)
		return "", ""
	}
	if df == "Dockerfile" {
		df = ""
	}
	return ctxDir, df
}

// composeEnv is a service's environment; a variable without a value
// (taken from the host in compose) is refused.
func composeEnv(svc string, m types.MappingWithEquals, sk func(string, string) (string, int), bad func(string, int, string, ...any)) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		key, l := sk(svc, "environment")
		switch {
		case v == nil:
			bad(key+"."+k, l, "takes its value from the host's environment in compose: Steward passes no host variables to a service; give it a value")
		case !envName(k):
			bad(key+"."+k, l, "%q is not an environment variable name", k)
		case strings.HasPrefix(k, "STEWARD_"):
			bad(key+"."+k, l, "STEWARD_ variables are Steward's own")
		case strings.ContainsRune(*v, 0):
			bad(key+"."+k, l, "holds a NUL byte")
		default:
			out[k] = *v
		}
	}
	return out
}

// checkComposeKeys refuses what Steward does not honour, at its line.
func checkComposeKeys(doc *yaml.Node, bad, warn func(string, int, string, ...any)) {
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		bad("", 0, "is not a compose file (a mapping with services)")
		return
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		switch {
		case strings.HasPrefix(k.Value, "x-"):
		case k.Value == "services":
			if v.Kind != yaml.MappingNode {
				continue // compose-go reports it
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				checkService(v.Content[j].Value, v.Content[j+1], bad, warn)
			}
		case k.Value == "networks" || k.Value == "volumes" || k.Value == "secrets" || k.Value == "configs" || k.Value == "include" || k.Value == "models":
			bad(k.Value, k.Line, "top-level %s are not supported: a compose environment is its services on one network of the attempt's own", k.Value)
		default:
			if _, ok := composeTop[k.Value]; !ok {
				bad(k.Value, k.Line, "not a compose key Steward honours")
			}
		}
	}
}

func checkService(name string, svc *yaml.Node, bad, warn func(string, int, string, ...any)) {
	if svc.Kind != yaml.MappingNode {
		return
	}
	p := "services." + name + "."
	for i := 0; i+1 < len(svc.Content); i += 2 {
		k, v := svc.Content[i], svc.Content[i+1]
		key := p + k.Value
		if strings.HasPrefix(k.Value, "x-") {
			continue
		}
		if k.Tag == "!!merge" {
			// A YAML merge (<<: *anchor): the merged keys are the service's.
			for _, m := range mergeSources(v) {
				checkService(name, m, bad, warn)
			}
			continue
		}
		if why, ok := composeRefused[k.Value]; ok {
			switch k.Value {
			case "cap_drop", "pull_policy":
				// Harmless: every capability is dropped already; nothing is pulled.
				continue
			case "network_mode":
				if v.Value == "bridge" || v.Value == "default" {
					continue
				}
			}
			bad(key, k.Line, "%s", why)
			continue
		}
		if !composeService[k.Value] {
			bad(key, k.Line, "not a compose service key Steward honours")
			continue
		}
		switch k.Value {
		case "build":
			if v.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(v.Content); j += 2 {
					if sub := v.Content[j].Value; sub != "context" && sub != "dockerfile" {
						bad(key+"."+sub, v.Content[j].Line, "only build.context and build.dockerfile are supported")
					}
				}
			}
		case "deploy":
			checkDeploy(key, v, bad)
		case "restart":
			warn(key, k.Line, "ignored: a service that exits is not restarted (a service with a health check that exits fails the attempt's start)")
		case "hostname":
			warn(key, k.Line, "ignored: a service is reached by its service name")
		case "depends_on":
			if v.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(v.Content); j += 2 {
					d := v.Content[j+1]
					if d.Kind != yaml.MappingNode {
						continue
					}
					for m := 0; m+1 < len(d.Content); m += 2 {
						if sub := d.Content[m].Value; sub != "condition" && sub != "required" {
							bad(key+"."+v.Content[j].Value+"."+sub, d.Content[m].Line, "not supported (only condition)")
						}
					}
				}
			}
		}
	}
}

func mergeSources(v *yaml.Node) []*yaml.Node {
	switch v.Kind {
	case yaml.AliasNode:
		return mergeSources(v.Alias)
	case yaml.MappingNode:
		return []*yaml.Node{v}
	case yaml.SequenceNode:
		var out []*yaml.Node
		for _, e := range v.Content {
			out = append(out, mergeSources(e)...)
		}
		return out
	}
	return nil
}

// checkDeploy allows deploy.resources.limits.{cpus,memory} (and reservations, which bound nothing).
func checkDeploy(key string, v *yaml.Node, bad func(string, int, string, ...any)) {
	if v.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, r := v.Content[i], v.Content[i+1]
		if k.Value != "resources" {
			bad(key+"."+k.Value, k.Line, "not supported: of deploy, only resources.limits (cpus, memory) is honoured")
			continue
		}
		if r.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(r.Content); j += 2 {
			rk, rv := r.Content[j], r.Content[j+1]
			if rk.Value != "limits" && rk.Value != "reservations" {
				bad(key+".resources."+rk.Value, rk.Line, "not supported: of deploy.resources, only limits (cpus, memory) is honoured")
				continue
			}
			if rv.Kind != yaml.MappingNode {
				continue
			}
			for m := 0; m+1 < len(rv.Content); m += 2 {
				if sub := rv.Content[m].Value; sub != "cpus" && sub != "memory" {
					bad(key+".resources."+rk.Value+"."+sub, rv.Content[m].Line, "not supported: only cpus and memory")
				}
			}
		}
	}
}

// line is where the key at path is written in doc (0 when it is not).
func line(doc *yaml.Node, path ...string) int {
	if len(doc.Content) == 0 {
		return 0
	}
	n := doc.Content[0]
	l := 0
	for _, p := range path {
		if n.Kind != yaml.MappingNode {
			return 0
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == p {
				l, n, found = n.Content[i].Line, n.Content[i+1], true
				break
			}
		}
		if !found {
			return 0
		}
	}
	return l
}

// defaultCaps are the capabilities Docker grants a container by default:
// all a compose service may add back to the none it starts with (SYS_ADMIN,
// SYS_MODULE, NET_ADMIN and the like would give an untrusted task more
// than any container gets).
var defaultCaps = map[string]bool{
	"AUDIT_WRITE": true, "CHOWN": true, "DAC_OVERRIDE": true, "FOWNER": true, "FSETID": true, "KILL": true,
	"MKNOD": true, "NET_BIND_SERVICE": true, "NET_RAW": true, "SETFCAP": true, "SETGID": true, "SETPCAP": true,
	"SETUID": true, "SYS_CHROOT": true,
}

func sortedCaps() []string {
	out := make([]string, 0, len(defaultCaps))
	for c := range defaultCaps {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}
