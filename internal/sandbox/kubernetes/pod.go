package kubernetes

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/steward-evals/steward/internal/sandbox"
)

// StewardDir is where the runner copies the steward binary (a writable
// emptyDir, like the workdir and /tmp, under the read-only root).
const StewardDir = "/opt/steward"

// containerName is the sandbox container of every sandbox pod.
const containerName = "sandbox"

// idleScript keeps the sandbox alive with nothing but /bin/sh: it waits on the
// container's stdin, which the kubelet keeps open (stdin: true) and never writes.
const idleScript = "while read -r _; do :; done"

// Create makes a pod for spec and waits until it runs.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	pod, err := p.podFor(spec)
	if err != nil {
		return nil, err
	}
	if err := p.ensureNamespace(ctx); err != nil {
		return nil, err
	}
	created, err := p.cs.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota") {
			return nil, sandbox.InfraError(fmt.Errorf("create pod for task %s: the namespace quota is full: %w", spec.Task, err))
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			// the pod spec or an admission rule refused (an unknown runtime
			// class, a policy): the configuration's fault, retrying cannot help
			return nil, fmt.Errorf("create pod for task %s: %w", spec.Task, err)
		}
		return nil, sandbox.InfraError(fmt.Errorf("create pod for task %s: %w", spec.Task, err))
	}
	s := &Sandbox{p: p, name: created.Name, uid: string(created.UID), workdir: pod.Spec.Containers[0].WorkingDir, spec: spec}
	fail := func(err error) (sandbox.Sandbox, error) {
		cctx, cancel := cleanupCtx(ctx)
		_ = p.deletePod(cctx, created.Name)
		cancel()
		return nil, err
	}
	running, err := p.waitRunning(ctx, created)
	if err != nil {
		return fail(err)
	}
	// The pod's address: where the relay sees its gateway connections come
	// from, so that each attempt's token is bound to its own pod.
	if s.ip, err = p.podIP(ctx, running); err != nil {
		return fail(err)
	}
	return s, nil
}

// podIP is a running pod's address (read again if the status that showed it
// running did not carry it yet).
func (p *Provider) podIP(ctx context.Context, pod *corev1.Pod) (netip.Addr, error) {
	if ip, err := netip.ParseAddr(pod.Status.PodIP); err == nil {
		return ip.Unmap(), nil
	}
	cur, err := p.cs.CoreV1().Pods(p.ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return netip.Addr{}, sandbox.InfraError(fmt.Errorf("read pod %s: %w", pod.Name, err))
	}
	ip, err := netip.ParseAddr(cur.Status.PodIP)
	if err != nil {
		return netip.Addr{}, sandbox.InfraError(fmt.Errorf("pod %s runs but has no address (%q)", pod.Name, cur.Status.PodIP))
	}
	return ip.Unmap(), nil
}

// podFor is the hardened pod of one sandbox.
func (p *Provider) podFor(spec sandbox.Spec) (*corev1.Pod, error) {
	if spec.Image == "" {
		return nil, fmt.Errorf("create sandbox for task %s: no image (was Prepare called?)", spec.Task)
	}
	workdir := spec.Workdir
	if workdir == "" {
		workdir = DefaultWorkdir
	}
	if !path.IsAbs(workdir) || path.Clean(workdir) == "/" {
		return nil, fmt.Errorf("create sandbox for task %s: workdir %q is not an absolute directory below /", spec.Task, workdir)
	}
	workdir = path.Clean(workdir)
	cpus, mem := spec.CPUs, spec.Memory
	if cpus <= 0 {
		cpus = DefaultCPUs
	}
	if mem <= 0 {
		mem = DefaultMemory
	}
	res := corev1.ResourceList{corev1.ResourceCPU: quantityCPU(cpus), corev1.ResourceMemory: quantityMem(mem)}
	env := make([]corev1.EnvVar, 0, len(spec.Env))
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, corev1.EnvVar{Name: k, Value: spec.Env[k]})
	}
	caps := make([]corev1.Capability, 0, len(spec.CapAdd))
	for _, c := range spec.CapAdd {
		caps = append(caps, corev1.Capability(strings.TrimPrefix(strings.ToUpper(c), "CAP_")))
	}
	no, yes := false, true
	// A spec may ask for a writable root of its own (a Harbor sample's:
	// sandbox.Spec.WritableRoot), as the provider's writable_root does for all.
	readOnly := !p.opts.WritableRoot && !spec.WritableRoot
	grace := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: p.meta(podName(p.opts.RunID, spec.Task, randomID(3)), spec.Task, "sandbox", spec.Labels),
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			NodeName:                      p.opts.NodeName,
			NodeSelector:                  p.opts.NodeSelector,
			Tolerations:                   p.opts.Tolerations,
			Hostname:                      "sandbox",
			// The pause process is PID 1 of the pod and reaps orphans, as
			// Docker's --init does for the docker provider.
			ShareProcessNamespace: &yes,
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           spec.Image,
				ImagePullPolicy: p.opts.ImagePullPolicy,
				Command:         []string{"/bin/sh", "-c", idleScript},
				Stdin:           true,
				WorkingDir:      workdir,
				Env:             env,
				Resources:       corev1.ResourceRequirements{Requests: res, Limits: res},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					Privileged:               &no,
					ReadOnlyRootFilesystem:   &readOnly,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: caps},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "work", MountPath: workdir}, {Name: "tmp", MountPath: "/tmp"}, {Name: "steward", MountPath: StewardDir}},
			}},
			Volumes: []corev1.Volume{
				{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "steward", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	// A workdir that is /tmp or the steward directory (or under one) needs no mount of its own.
	for _, d := range []string{"/tmp", StewardDir} {
		if workdir == d || strings.HasPrefix(workdir, d+"/") {
			c := &pod.Spec.Containers[0]
			c.VolumeMounts = c.VolumeMounts[1:]
			pod.Spec.Volumes = pod.Spec.Volumes[1:]
			break
		}
	}
	if p.opts.RuntimeClassName != "" {
		rc := p.opts.RuntimeClassName
		pod.Spec.RuntimeClassName = &rc
	}
	return pod, nil
}

// waitFailReasons are container waiting reasons that will not clear by themselves.
var waitFailReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// waitRunning watches the pod until its sandbox container runs, and returns
// the pod as it was then.
func (p *Provider) waitRunning(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	return p.waitPod(ctx, pod, false)
}

// waitStarted is waitRunning until the container's startup probe passed too.
func (p *Provider) waitStarted(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	return p.waitPod(ctx, pod, true)
}

func (p *Provider) waitPod(ctx context.Context, pod *corev1.Pod, started bool) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.StartTimeout)
	defer cancel()
	check := func(pod *corev1.Pod) (bool, error) {
		switch pod.Status.Phase {
		case corev1.PodFailed, corev1.PodSucceeded:
			return false, sandbox.InfraError(fmt.Errorf("pod %s ended before it ran (%s): %s", pod.Name, pod.Status.Phase, podWhy(pod)))
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.State.Running != nil {
				return !started || (cs.Started != nil && *cs.Started), nil
			}
			if w := cs.State.Waiting; w != nil && waitFailReasons[w.Reason] {
				if strings.Contains(w.Reason, "Image") {
					return false, fmt.Errorf("pod %s: image %s cannot be run: %s: %s (push it to a registry the cluster pulls from, or check image_pull_policy)", pod.Name, cs.Image, w.Reason, w.Message)
				}
				return false, fmt.Errorf("pod %s: container cannot start: %s: %s", pod.Name, w.Reason, w.Message)
			}
			if t := cs.State.Terminated; t != nil {
				return false, sandbox.InfraError(fmt.Errorf("pod %s: sandbox container exited %d (%s) before it ran", pod.Name, t.ExitCode, t.Reason))
			}
		}
		return false, nil
	}
	if ok, err := check(pod); ok || err != nil {
		return pod, err
	}
	rv := pod.ResourceVersion
	for {
		w, err := p.cs.CoreV1().Pods(p.ns).Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String(), ResourceVersion: rv,
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, p.startTimeout(pod.Name, ctx)
			}
			return nil, sandbox.InfraError(fmt.Errorf("watch pod %s: %w", pod.Name, err))
		}
		for ev := range w.ResultChan() {
			cur, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == "DELETED" {
				w.Stop()
				return nil, sandbox.InfraError(fmt.Errorf("pod %s was deleted before it ran", pod.Name))
			}
			if ok, err := check(cur); ok || err != nil {
				w.Stop()
				return cur, err
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return nil, p.startTimeout(pod.Name, ctx)
		}
		// The watch closed (server timeout): re-read and watch again.
		cur, err := p.cs.CoreV1().Pods(p.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return nil, p.startTimeout(pod.Name, ctx)
			}
			return nil, sandbox.InfraError(fmt.Errorf("read pod %s: %w", pod.Name, err))
		}
		if ok, err := check(cur); ok || err != nil {
			return cur, err
		}
		rv = cur.ResourceVersion
	}
}

func (p *Provider) startTimeout(name string, ctx context.Context) error {
	why := ""
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if cur, err := p.cs.CoreV1().Pods(p.ns).Get(cctx, name, metav1.GetOptions{}); err == nil {
		why = ": " + podWhy(cur)
	}
	return sandbox.InfraError(fmt.Errorf("pod %s did not start within %s%s: %w", name, p.opts.StartTimeout, why, ctx.Err()))
}

// podWhy summarises why a pod is not running.
func podWhy(pod *corev1.Pod) string {
	var parts []string
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		parts = append(parts, strings.TrimSpace(pod.Status.Reason+" "+pod.Status.Message))
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			parts = append(parts, fmt.Sprintf("waiting: %s %s", w.Reason, w.Message))
		}
		if t := cs.State.Terminated; t != nil {
			parts = append(parts, fmt.Sprintf("terminated: %s exit %d", t.Reason, t.ExitCode))
		}
	}
	if len(parts) == 0 {
		return "phase " + string(pod.Status.Phase)
	}
	return strings.Join(parts, "; ")
}

// Sandbox is one pod.
type Sandbox struct {
	p       *Provider
	name    string
	uid     string
	workdir string
	spec    sandbox.Spec // what Grader makes a fresh pod of
	ip      netip.Addr   // the pod's address: where its gateway connections come from

	mu       sync.Mutex
	ooms     int64
	closed   bool
	closeErr error
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// ID is the pod name.
func (s *Sandbox) ID() string { return s.name }

// GatewayPeer is the address the gateway sees this sandbox's connections
// come from: the pod's IP, which the relay names in the PROXY line it writes
// before the pod's first byte; the attempt's token is bound to it.
func (s *Sandbox) GatewayPeer() (netip.Addr, bool) { return s.ip, s.ip.IsValid() }

// Workdir implements sandbox.Sandbox.
func (s *Sandbox) Workdir() string { return s.workdir }

// StewardDir implements sandbox.Sandbox: an emptyDir of its own (or the
// writable root's, when the workdir holds it).
func (s *Sandbox) StewardDir() string { return StewardDir }

func (s *Sandbox) abs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(s.workdir, p)
}

// stream runs cmd in the sandbox container through the API server, with
// stdin, and returns its exit code (-1 and an error when the stream failed).
func (s *Sandbox) stream(ctx context.Context, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	req := s.p.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.p.ns).Name(s.name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: containerName, Command: cmd, Stdin: stdin != nil, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
	spdy, err := remotecommand.NewSPDYExecutor(s.p.rc, "POST", req.URL())
	if err != nil {
		return -1, fmt.Errorf("exec in pod %s: %w", s.name, err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(s.p.rc, "GET", req.URL().String())
	if err != nil {
		return -1, fmt.Errorf("exec in pod %s: %w", s.name, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return -1, fmt.Errorf("exec in pod %s: %w", s.name, err)
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err == nil {
		return 0, nil
	}
	var ee utilexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ee.ExitStatus(), nil
	}
	return -1, err
}

// execWrapper reads a preamble of N lines from stdin (the environment, the
// workdir and the command: never in the exec URL, which API servers log),
// reports its pid on stderr, and runs it; the rest of stdin is the command's.
// The shell's read builtin takes one byte at a time from a pipe, so nothing
// of the command's own stdin is consumed.
const execWrapper = `IFS= read -r n || exit 125; s=; i=0; while [ "$i" -lt "$n" ]; do IFS= read -r l || break; s="$s$l
"; i=$((i+1)); done; printf '\000steward-pid:%s\n' "$$" >&2; eval "$s"`

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// preamble is the script execWrapper evaluates, prefixed by its line count.
func (s *Sandbox) preamble(spec sandbox.ExecSpec) []byte {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		fmt.Fprintf(&b, "export %s=%s\n", k, shQuote(spec.Env[k]))
	}
	fmt.Fprintf(&b, "cd %s || exit 125\n", shQuote(s.workdir))
	fmt.Fprintf(&b, "exec /bin/sh -c %s\n", shQuote(spec.Shell))
	script := b.String()
	return []byte(strconv.Itoa(strings.Count(script, "\n")) + "\n" + script)
}

// Exec runs spec.Shell with /bin/sh -c in the workdir.
func (s *Sandbox) Exec(ctx context.Context, spec sandbox.ExecSpec) (sandbox.ExecResult, error) {
	start := time.Now()
	for k := range spec.Env {
		if !envName(k) {
			return sandbox.ExecResult{}, fmt.Errorf("exec in pod %s: bad environment variable name %q", s.name, k)
		}
	}
	stdin := io.MultiReader(bytes.NewReader(s.preamble(spec)), bytes.NewReader(spec.Stdin))
	out := sandbox.NewExecOutput(spec.MaxOutput)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := s.stream(sctx, []string{"/bin/sh", "-c", execWrapper}, stdin, out.Stdout, out.Stderr)
		done <- result{code, err}
	}()
	r, finished, timedOut := sandbox.WaitExec(ctx, spec.Timeout, done, func(r result) bool { return r.err == nil }, out.Stderr.PID(), func(pid int) {
		kctx, kcancel := cleanupCtx(ctx)
		s.killTree(kctx, pid)
		kcancel()
		cancel()
	})
	res := sandbox.ExecResult{TimedOut: timedOut}
	if finished {
		if r.err != nil {
			return sandbox.ExecResult{}, s.execErr(ctx, r.err)
		}
		ctx = context.WithoutCancel(ctx) // it ended: not interrupted, whatever ctx did since
	} else {
		r.code = 137
	}
	out.Fill(&res)
	res.Duration = time.Since(start)
	res.ExitCode = r.code
	if ctx.Err() != nil && !res.TimedOut {
		return res, fmt.Errorf("exec in pod %s: %w", s.name, ctx.Err())
	}
	if !res.TimedOut && res.ExitCode == 137 {
		ictx, icancel := cleanupCtx(ctx)
		res.OOMKilled = s.oomSince(ictx)
		icancel()
	}
	return res, nil
}

func envName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// execErr classifies a failed exec stream: the pod is gone or not running
// (maybe its idle shell was OOM-killed) or the API server failed; both are
// the infrastructure's fault.
func (s *Sandbox) execErr(ctx context.Context, err error) error {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if pod, gerr := s.p.cs.CoreV1().Pods(s.p.ns).Get(cctx, s.name, metav1.GetOptions{}); gerr == nil && pod.Status.Phase != corev1.PodRunning {
		return sandbox.InfraError(fmt.Errorf("exec in pod %s (not running: %s): %w", s.name, podWhy(pod), err))
	}
	return sandbox.InfraError(fmt.Errorf("exec in pod %s: %w", s.name, err))
}

// killTreeScript kills a process and all its descendants (collected first,
// so that none is re-parented away before it is found).
const killTreeScript = `t=" $1 "; for r in 1 2 3 4 5 6; do for d in /proc/[0-9]*; do read -r p c s pp rest < $d/stat 2>/dev/null || continue; case "$t" in *" $pp "*) case "$t" in *" $p "*) ;; *) t="$t$p ";; esac;; esac; done; done; for p in $t; do kill -KILL $p 2>/dev/null; done; true`

// killAllScript kills every process except the pod's init (1, the pause
// process, which reaps orphans), the idle shell (the oldest process started
// from outside the pod's PID namespace: parent 0) and itself, in a few
// rounds so forking loops die too.
const killAllScript = `me=$$; idle=0
for d in /proc/[0-9]*; do read -r p c s pp r < $d/stat 2>/dev/null || continue; if [ "$pp" = 0 ] && [ "$p" != 1 ] && { [ $idle = 0 ] || [ $p -lt $idle ]; }; then idle=$p; fi; done
for round in 1 2 3 4 5; do left=0; for d in /proc/[0-9]*; do p=${d#/proc/}; case $p in 1|$me|$idle) continue;; esac; kill -KILL $p 2>/dev/null && left=1; done; [ $left = 0 ] && break; done; true`

// killTree kills a timed-out command and its children from a second exec;
// without a pid it kills everything but the idle shell (pid 1).
func (s *Sandbox) killTree(ctx context.Context, pid int) {
	if pid > 1 {
		_, _ = s.run(ctx, killTreeScript, strconv.Itoa(pid))
		return
	}
	_, _ = s.run(ctx, killAllScript)
}

// run executes a short internal script (no secrets: its text is in the URL).
func (s *Sandbox) run(ctx context.Context, script string, args ...string) (string, error) {
	out, errb := sandbox.NewCapped(1<<20), sandbox.NewCapped(64<<10)
	code, err := s.stream(ctx, append([]string{"/bin/sh", "-c", script, "steward"}, args...), nil, out, errb)
	if err != nil {
		return "", s.execErr(ctx, err)
	}
	if code != 0 {
		return string(out.Bytes()), fmt.Errorf("pod %s: internal command exited %d: %s", s.name, code, strings.TrimSpace(string(errb.Bytes())))
	}
	return string(out.Bytes()), nil
}

// oomScript prints the memory cgroup's oom_kill counter (cgroup v1 or v2).
const oomScript = `for f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do [ -r $f ] || continue; while read -r k v; do [ "$k" = oom_kill ] && echo $v; done < $f; exit 0; done; echo -1`

// oomSince reports whether the memory limit killed a process since the last check.
func (s *Sandbox) oomSince(ctx context.Context) bool {
	out, err := s.run(ctx, oomScript)
	n, perr := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil || perr != nil || n < 0 {
		pod, gerr := s.p.cs.CoreV1().Pods(s.p.ns).Get(ctx, s.name, metav1.GetOptions{})
		if gerr != nil {
			return false
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.Reason == "OOMKilled" {
				return true
			}
		}
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	grew := n > s.ooms
	s.ooms = n
	return grew
}

// CopyIn writes files as a tar stream over exec (tar -x in the sandbox),
// creating parent directories.
func (s *Sandbox) CopyIn(ctx context.Context, files []sandbox.File) error {
	if len(files) == 0 {
		return nil
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	now := time.Now()
	for _, f := range files {
		full := s.abs(f.Path)
		if full == "/" {
			return fmt.Errorf("copy into sandbox: bad path %q", f.Path)
		}
		var parents []string
		for d := path.Dir(full); d != "/" && !dirs[d]; d = path.Dir(d) {
			if d == StewardDir || strings.HasPrefix(StewardDir, d+"/") {
				// The steward volume and what holds it exist: no header that
				// would have tar set the mode of a read-only root's /opt.
				break
			}
			parents = append(parents, d)
			dirs[d] = true
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(parents[i], "/") + "/", Mode: 0o755, ModTime: now}); err != nil {
				return fmt.Errorf("copy into sandbox: %w", err)
			}
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(full, "/"), Mode: mode, Size: int64(len(f.Data)), ModTime: now}); err != nil {
			return fmt.Errorf("copy into sandbox: %w", err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return fmt.Errorf("copy into sandbox: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("copy into sandbox: %w", err)
	}
	errb := sandbox.NewCapped(64 << 10)
	code, err := s.stream(ctx, []string{"tar", "-x", "-o", "-f", "-", "-C", "/"}, &buf, io.Discard, errb)
	if err != nil {
		return s.execErr(ctx, err)
	}
	if code != 0 {
		return fmt.Errorf("copy into sandbox %s: tar exited %d: %s (the image needs tar; a read-only root takes files only below the workdir and /tmp)", s.name, code, strings.TrimSpace(string(errb.Bytes())))
	}
	return nil
}

// MaxCopyOut bounds what CopyOut reads from one file.
const MaxCopyOut = sandbox.MaxCopyOut

// copyOutScript tars one regular file: exit 3 = a directory, 4 = missing.
const copyOutScript = `[ -d "$1" ] && exit 3; [ -f "$1" ] || exit 4; cd "$(dirname -- "$1")" && exec tar -c -f - -- "./$(basename -- "$1")"`

// CopyOut reads one regular file as a tar stream over exec.
func (s *Sandbox) CopyOut(ctx context.Context, p string) ([]byte, error) {
	full := s.abs(p)
	out := sandbox.NewCapped(MaxCopyOut + 64<<10)
	errb := sandbox.NewCapped(64 << 10)
	code, err := s.stream(ctx, []string{"/bin/sh", "-c", copyOutScript, "steward", full}, nil, out, errb)
	if err != nil {
		return nil, s.execErr(ctx, err)
	}
	switch code {
	case 0:
	case 3:
		return nil, fmt.Errorf("copy %s out of sandbox: is a directory", full)
	case 4:
		return nil, fmt.Errorf("copy %s out of sandbox: no such file", full)
	default:
		return nil, sandbox.InfraError(fmt.Errorf("copy %s out of sandbox %s: tar exited %d: %s", full, s.name, code, strings.TrimSpace(string(errb.Bytes()))))
	}
	return sandbox.ReadTarFile(bytes.NewReader(out.Bytes()), full, out.Truncated())
}

// resetScript kills what the last attempt left and empties the workdir (a
// mount point: its contents go, not the directory). What the sandbox's setup
// and earlier attempts wrote elsewhere (/tmp) stays, as with Docker: a group
// lane's or a reuse pool's state lives there.
const resetScript = killAllScript + `; cd / && rm -rf -- "$1"/* "$1"/.[!.]* "$1"/..?* 2>/dev/null; [ -d "$1" ] && [ -z "$(ls -A -- "$1")" ]`

// Reset implements sandbox.Sandbox.
func (s *Sandbox) Reset(ctx context.Context) error {
	var err error
	for try := 0; try < 4; try++ {
		if _, err = s.run(ctx, resetScript, s.workdir); err == nil || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(try+1) * 250 * time.Millisecond):
		}
	}
	if err != nil {
		return sandbox.InfraError(fmt.Errorf("reset sandbox %s: %w", s.name, err))
	}
	return nil
}

// Close deletes the pod. It works with a cancelled ctx and is safe to call twice.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.closeErr
	}
	s.closed = true
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if err := s.p.deletePod(cctx, s.name); err != nil {
		s.closeErr = fmt.Errorf("close sandbox %s: %w", s.name, err)
	}
	return s.closeErr
}

// capped keeps the first max bytes written.
