package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kubeconf"
)

// The exec wrapper gets the environment, workdir and command through stdin
// (never the exec URL, which API servers log) and leaves the command's own
// stdin untouched. Checked with the host's /bin/sh running the real wrapper.
func TestExecWrapperPreamble(t *testing.T) {
	s := &Sandbox{workdir: t.TempDir()}
	spec := sandbox.ExecSpec{
		Shell: `printf '%s|%s|' "$A" "$B"; pwd; cat`,
		Env:   map[string]string{"A": "it's \"quoted\" $HOME `x`", "B": "two\nlines\n"},
	}
	in := append(s.preamble(spec), []byte("stdin-data\nmore")...)
	cmd := exec.Command("/bin/sh", "-c", execWrapper)
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("wrapper: %v: %s", err, errb.String())
	}
	want := "it's \"quoted\" $HOME `x`|two\nlines\n|" + s.workdir + "\nstdin-data\nmore"
	if out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
	if !strings.HasPrefix(errb.String(), sandbox.PIDMarker) {
		t.Fatalf("stderr %q does not start with the pid marker", errb.String())
	}
	for _, v := range spec.Env {
		if strings.Contains(execWrapper, v) {
			t.Fatal("an environment value is in the exec command line")
		}
	}
}

// Every sandbox pod is hardened whatever the spec says.
func TestPodHardening(t *testing.T) {
	p := &Provider{opts: Options{RunID: "Run_1", NodeName: "n1", RuntimeClassName: "gvisor", ImagePullPolicy: corev1.PullNever,
		NodeSelector: map[string]string{"pool": "evals"}, Tolerations: []corev1.Toleration{{Key: "evals", Operator: corev1.TolerationOpExists}}},
		ns: "ns", lock: "/x/runs/r.lock", scope: "host:h"}
	pod, err := p.podFor(sandbox.Spec{RunID: "Run_1", Task: "My.Task_", Image: "img", CPUs: 0.5, Memory: 64 << 20, CapAdd: []string{"CAP_NET_RAW"}})
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	sc := c.SecurityContext
	if *sc.AllowPrivilegeEscalation || *sc.Privileged || !*sc.ReadOnlyRootFilesystem {
		t.Fatalf("security context %+v", sc)
	}
	if len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 1 || sc.Capabilities.Add[0] != "NET_RAW" {
		t.Fatalf("capabilities %+v", sc.Capabilities)
	}
	if c.Resources.Limits.Cpu().MilliValue() != 500 || c.Resources.Limits.Memory().Value() != 64<<20 || !c.Resources.Requests.Cpu().Equal(*c.Resources.Limits.Cpu()) {
		t.Fatalf("resources %+v", c.Resources)
	}
	if *pod.Spec.AutomountServiceAccountToken || *pod.Spec.EnableServiceLinks || pod.Spec.NodeName != "n1" || *pod.Spec.RuntimeClassName != "gvisor" ||
		pod.Spec.NodeSelector["pool"] != "evals" || len(pod.Spec.Tolerations) != 1 || c.ImagePullPolicy != corev1.PullNever {
		t.Fatalf("pod spec %+v", pod.Spec)
	}
	if pod.Labels[sandbox.LabelManaged] != "true" || pod.Labels[sandbox.LabelRun] != "Run_1" || pod.Labels[sandbox.LabelTask] != "My.Task" {
		t.Fatalf("labels %v", pod.Labels)
	}
	if pod.Annotations[AnnotationLock] != "/x/runs/r.lock" || pod.Annotations[AnnotationLockScope] != "host:h" {
		t.Fatalf("annotations %v", pod.Annotations)
	}
	if len(pod.Name) > 63 || strings.ToLower(pod.Name) != pod.Name {
		t.Fatalf("pod name %q", pod.Name)
	}
	if _, err := p.podFor(sandbox.Spec{Task: "t", Image: "i", Workdir: "/"}); err == nil {
		t.Fatal("workdir / accepted")
	}
}

func quota(name string, hard, used map[corev1.ResourceName]string) corev1.ResourceQuota {
	q := corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{}, Used: corev1.ResourceList{}}}
	for k, v := range hard {
		q.Status.Hard[k] = resource.MustParse(v)
	}
	for k, v := range used {
		q.Status.Used[k] = resource.MustParse(v)
	}
	return q
}

func TestQuotaCapacity(t *testing.T) {
	specs := []sandbox.Spec{{CPUs: 1, Memory: 256 << 20}, {CPUs: 0.5, Memory: 512 << 20}}
	c, err := QuotaCapacity("ns", nil, specs, false)
	if err != nil || c.Limit != 0 || c.Source != SourceUnlimited {
		t.Fatalf("no quota: %+v %v", c, err)
	}
	// cpu: (10 - 2 used - 0.2 relay) / 1 = 7; memory: (8Gi - 0.0625Gi) / 0.5Gi = 15; pods: 100-1
	qs := []corev1.ResourceQuota{quota("compute", map[corev1.ResourceName]string{"requests.cpu": "10", "requests.memory": "8Gi", "pods": "100"}, map[corev1.ResourceName]string{"requests.cpu": "2"})}
	c, err = QuotaCapacity("ns", qs, specs, false)
	if err != nil || c.Limit != 7 || !strings.Contains(c.Source, "quota ns/compute: requests.cpu 10 (used 2)") {
		t.Fatalf("cpu-bound: %+v %v", c, err)
	}
	qs = append(qs, quota("pods", map[corev1.ResourceName]string{"pods": "4"}, nil))
	c, err = QuotaCapacity("ns", qs, specs, true)
	if err != nil || c.Limit != 4 || !strings.Contains(c.Source, "ns/pods: pods 4") {
		t.Fatalf("pod-bound: %+v %v", c, err)
	}
	if _, err := QuotaCapacity("ns", []corev1.ResourceQuota{quota("tiny", map[corev1.ResourceName]string{"limits.memory": "100Mi"}, nil)}, specs, false); err == nil {
		t.Fatal("a quota with room for no sandbox was accepted")
	}
}

// kubeconfig: --kubeconfig > KUBECONFIG > _steward.yaml; the other settings: STEWARD_KUBE_* > file.
func TestOptionsPrecedence(t *testing.T) {
	env := map[string]string{"KUBECONFIG": "/env/kc", EnvNamespace: "env-ns"}
	getenv := func(k string) string { return env[k] }
	file := kubeconf.Settings{Kubeconfig: "/file/kc", Namespace: "file-ns", NodeName: "n1", ImagePullPolicy: "Never",
		Tolerations: []kubeconf.Toleration{{Key: "k", Operator: "Exists"}}}
	o, err := OptionsFrom(file, getenv)
	if err != nil || o.Kubeconfig != "/env/kc" || o.Namespace != "env-ns" || o.NodeName != "n1" || o.ImagePullPolicy != corev1.PullNever || len(o.Tolerations) != 1 {
		t.Fatalf("env over file: %+v %v", o, err)
	}
	file.KubeconfigFromFlag, file.Kubeconfig = true, "/flag/kc"
	if o, _ := OptionsFrom(file, getenv); o.Kubeconfig != "/flag/kc" {
		t.Fatalf("flag over env: %q", o.Kubeconfig)
	}
	env[EnvPullPolicy] = "Sometimes"
	if _, err := OptionsFrom(file, getenv); err == nil || !strings.Contains(err.Error(), EnvPullPolicy) {
		t.Fatalf("bad pull policy in the environment: %v", err)
	}
}

// namespace: per-run (from the file or the environment, which wins as for
// every setting) turns on the per-run namespace; it is never a namespace name.
func TestOptionsNamespacePerRun(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	o, err := OptionsFrom(kubeconf.Settings{Namespace: NamespacePerRun}, getenv)
	if err != nil || !o.NamespacePerRun || o.Namespace != "" {
		t.Fatalf("file per-run: %+v %v", o, err)
	}
	env[EnvNamespace] = "evals"
	if o, _ := OptionsFrom(kubeconf.Settings{Namespace: NamespacePerRun}, getenv); o.NamespacePerRun || o.Namespace != "evals" {
		t.Fatalf("the environment's namespace must win over the file's per-run: %+v", o)
	}
	env[EnvNamespace] = NamespacePerRun
	if o, _ := OptionsFrom(kubeconf.Settings{Namespace: "evals"}, getenv); !o.NamespacePerRun || o.Namespace != "" {
		t.Fatalf("the environment's per-run must win over the file's namespace: %+v", o)
	}
}

// A run's namespace is a DNS-1123 label of at most 63 characters.
func TestRunNamespaceName(t *testing.T) {
	for _, run := range []string{"20260101-125959-a1b2c3", "Some_Run.ID", strings.Repeat("x", 80) + "-", "--a--"} {
		ns := RunNamespace(run)
		if errs := validation.IsDNS1123Label(ns); len(errs) != 0 || !strings.HasPrefix(ns, "steward-") {
			t.Fatalf("RunNamespace(%q) = %q: %v", run, ns, errs)
		}
	}
	if RunNamespace("20260101-125959-a1b2c3") != "steward-20260101-125959-a1b2c3" {
		t.Fatal(RunNamespace("20260101-125959-a1b2c3"))
	}
}

// In per-run mode no quota bounds the budget (the namespace is new): the
// PLAN line's source says so, without asking the API server.
func TestPerRunCapacitySource(t *testing.T) {
	c, err := (&Provider{perRun: true}).Capacity(context.Background(), []sandbox.Spec{{}})
	if err != nil || c.Limit != 0 || !strings.Contains(c.Source, "per-run namespace has no ResourceQuota") || !strings.Contains(c.Source, "max_sandboxes") {
		t.Fatalf("%+v %v", c, err)
	}
}

// A spec's own writable root (a Harbor sample's) turns the read-only root
// off for its pod alone; the rest of the hardening stays.
func TestPodWritableRootPerSpec(t *testing.T) {
	p := &Provider{opts: Options{RunID: "r"}, ns: "ns"}
	for _, writable := range []bool{false, true} {
		pod, err := p.podFor(sandbox.Spec{RunID: "r", Task: "t", Image: "img", WritableRoot: writable})
		if err != nil {
			t.Fatal(err)
		}
		sc := pod.Spec.Containers[0].SecurityContext
		if *sc.ReadOnlyRootFilesystem == writable {
			t.Errorf("spec writable root %v: read-only root %v", writable, *sc.ReadOnlyRootFilesystem)
		}
		if *sc.AllowPrivilegeEscalation || *sc.Privileged || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("spec writable root %v: security context %+v", writable, sc)
		}
	}
}

// TestRefusesNetworkAllowlist: a task with a network allowlist is refused
// when the eval set is checked (the descriptor's Check) and at launch
// (Prepare, bad input), with the reason: NetworkPolicy filters by address.
func TestRefusesNetworkAllowlist(t *testing.T) {
	probs := check(sandbox.Settings{Image: "img", Network: NetworkAllowlist})
	if len(probs) != 1 || probs[0].Field != "network" || !strings.Contains(probs[0].Message, "NetworkPolicy filters by address") {
		t.Fatalf("check: %+v", probs)
	}
	if probs := check(sandbox.Settings{Image: "img", Network: "gateway"}); len(probs) != 0 {
		t.Fatalf("check of a gateway sandbox: %+v", probs)
	}
	err := (&Provider{}).Prepare(context.Background(), []*sandbox.Spec{{Task: "t", Image: "img", Network: NetworkAllowlist, AllowedHosts: []string{"pypi.org"}}})
	if !errors.Is(err, sandbox.ErrBadInput) || !strings.Contains(err.Error(), "cannot enforce a network allowlist") {
		t.Fatalf("Prepare: %v", err)
	}
}
