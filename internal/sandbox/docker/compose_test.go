package docker

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/steward-evals/steward/internal/sandbox"
)

func composeNets(t *testing.T, r *testRun) int {
	t.Helper()
	f := filters.NewArgs(filters.Arg("label", sandbox.LabelRun+"="+r.ID), filters.Arg("label", labelRole+"="+roleComposeNet))
	ns, err := r.P.cli.NetworkList(context.Background(), network.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return len(ns)
}

// A compose environment on Docker: the services start (one after another
// is healthy, as depends_on says) on a network of the sandbox's own, main
// reaches them by their names, each runs hardened as a sandbox does (every
// capability dropped but what cap_add names, no-new-privileges, its CPU,
// memory and PID limits, no mounts, no published ports, not privileged)
// and labelled with the run, and Close removes them with their network.
func TestComposeServices(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	img := testImage(t)
	s := spec(t, "compose")
	s.BuildTimeout = time.Minute
	s.Services = []sandbox.Service{
		{Name: "web", Image: img, Env: map[string]string{"GREETING": "svc"},
			Command:     []string{"/bin/sh", "-c", "mkdir -p /tmp/srv && echo hi-$GREETING > /tmp/srv/x && exec httpd -f -p 8080 -h /tmp/srv"},
			Healthcheck: &sandbox.Healthcheck{Test: []string{"CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8080/x"}, Interval: 200 * time.Millisecond, Retries: 50},
			CPUs:        0.25, Memory: 32 << 20, CapAdd: []string{"NET_BIND_SERVICE"}},
		{Name: "late", Image: img, Command: []string{"sleep", "3600"}, DependsOn: map[string]string{"web": "service_healthy"}},
	}
	prepare(t, r, &s)
	sb := mustCreate(t, r, s)
	if res := mustExec(t, sb, "wget -q -O - http://web:8080/x"); !strings.Contains(string(res.Stdout), "hi-svc") {
		t.Fatalf("main did not reach web by name: %+v %s", res, res.Stderr)
	}
	if len(sb.services) != 2 || sb.compose == nil {
		t.Fatalf("services %v network %v", sb.services, sb.compose)
	}
	ctx := context.Background()
	var webStart, lateStart time.Time
	for _, cid := range sb.services {
		ins, err := r.P.cli.ContainerInspect(ctx, cid)
		if err != nil {
			t.Fatal(err)
		}
		name := ins.Config.Labels[LabelService]
		hc := ins.HostConfig
		if !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Contains(hc.SecurityOpt, "no-new-privileges") || hc.Privileged ||
			len(hc.PortBindings) > 0 || len(hc.Binds) > 0 || len(ins.Mounts) > 0 || hc.PidsLimit == nil || *hc.PidsLimit != 128 ||
			hc.NetworkMode.IsHost() || hc.PidMode.IsHost() || hc.IpcMode.IsHost() {
			t.Errorf("service %s is not hardened: %+v", name, hc)
		}
		if ins.Config.Labels[sandbox.LabelRun] != r.ID || ins.Config.Labels[sandbox.LabelManaged] != "true" || ins.Config.Labels[LabelLock] == "" || ins.Config.Labels["dev.steward.test"] != "true" {
			t.Errorf("service %s labels %v", name, ins.Config.Labels)
		}
		if len(ins.NetworkSettings.Networks) != 1 || ins.NetworkSettings.Networks[sb.compose.Name] == nil {
			t.Errorf("service %s networks %v, want only %s", name, ins.NetworkSettings.Networks, sb.compose.Name)
		}
		started, _ := time.Parse(time.RFC3339Nano, ins.State.StartedAt)
		switch name {
		case "web":
			webStart = started
			if hc.NanoCPUs != 25e7 || hc.Memory != 32<<20 || len(hc.CapAdd) != 1 || strings.TrimPrefix(hc.CapAdd[0], "CAP_") != "NET_BIND_SERVICE" {
				t.Errorf("web: cpus %d memory %d caps %v", hc.NanoCPUs, hc.Memory, hc.CapAdd)
			}
		case "late":
			lateStart = started
			if hc.NanoCPUs != int64(DefaultCPUs*1e9) || hc.Memory != DefaultMemory || len(hc.CapAdd) != 0 {
				t.Errorf("late: defaults not applied: cpus %d memory %d caps %v", hc.NanoCPUs, hc.Memory, hc.CapAdd)
			}
		}
	}
	if !lateStart.After(webStart) {
		t.Errorf("late (depends on web healthy) started %v, web %v", lateStart, webStart)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c, _ := countRun(t, r.P.cli, r.ID); c != 0 || composeNets(t, r) != 0 {
		t.Fatalf("after Close: %d containers, %d compose networks", c, composeNets(t, r))
	}
}

// A service that never becomes healthy fails the sandbox's creation with
// an error naming it (unhealthy after its retries, or not healthy within
// the start's bound), and leaves nothing behind.
func TestComposeUnhealthy(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	img := testImage(t)
	for _, c := range []struct {
		name  string
		hc    sandbox.Healthcheck
		bound time.Duration
		want  string
	}{
		{"unhealthy", sandbox.Healthcheck{Test: []string{"CMD", "false"}, Interval: 100 * time.Millisecond, Retries: 2}, time.Minute, "compose service db of task down is unhealthy: its health check failed"},
		// The bound covers the service's start too: on a loaded daemon the
		// start alone can take it ("not started within 6s"); either way
		// the error names the service and the bound.
		{"slow", sandbox.Healthcheck{Test: []string{"CMD-SHELL", "exit 1"}, Interval: 200 * time.Millisecond, Retries: 10000}, 6 * time.Second, "compose service db of task down"},
	} {
		s := spec(t, "down")
		s.BuildTimeout = c.bound
		s.Services = []sandbox.Service{{Name: "db", Image: img, Command: []string{"sleep", "3600"}, Healthcheck: &c.hc}}
		prepare(t, r, &s)
		sb, err := r.P.Create(context.Background(), s)
		if err == nil {
			_ = sb.Close(context.Background())
			t.Fatalf("%s: created", c.name)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if c.name == "slow" && !strings.Contains(err.Error(), "within 6s") {
			t.Errorf("slow: %v does not name the bound, 6s", err)
		}
		if n, _ := countRun(t, r.P.cli, r.ID); n != 0 || composeNets(t, r) != 0 {
			t.Errorf("%s: %d containers, %d compose networks left", c.name, n, composeNets(t, r))
		}
	}
}

// The preflight counts a network per live compose sandbox.
func TestNetworksWantedCompose(t *testing.T) {
	plain := sandbox.Spec{Network: "gateway"}
	comp := sandbox.Spec{Network: "gateway", Services: []sandbox.Service{{Name: "db"}}}
	iso := sandbox.Spec{Network: "isolated", Services: []sandbox.Service{{Name: "db"}}}
	for _, c := range []struct {
		specs []sandbox.Spec
		want  int
	}{
		{[]sandbox.Spec{plain}, 1},
		{[]sandbox.Spec{plain, comp}, 1 + 4},
		{[]sandbox.Spec{comp, {Network: "bridge"}}, 2 + 4},
		{[]sandbox.Spec{iso}, 1 + 8},
	} {
		if got := NetworksWanted(c.specs, 4); got != c.want {
			t.Errorf("%d specs: %d networks, want %d", len(c.specs), got, c.want)
		}
	}
}
