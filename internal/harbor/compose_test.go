package harbor

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/sandbox"
)

func composeTask(compose string) map[string]string {
	f := base("[environment]\nworkdir = \"/app\"\nenv = { A = \"toml\" }\n")
	delete(f, "environment/Dockerfile")
	f["environment/docker-compose.yaml"] = compose
	f["environment/main/Dockerfile.main"] = "FROM scratch\n"
	f["environment/web/Dockerfile"] = "FROM scratch\n"
	return f
}

const goodCompose = `name: ignored
x-common: &common
  cpus: 0.5
services:
  main:
    build:
      context: ./main
      dockerfile: Dockerfile.main
    environment:
      A: compose
      B: "${UNSET_IN_HOST:-dflt}"
    working_dir: /ignored
    depends_on:
      web:
        condition: service_healthy
  web:
    build: ./web
    command: ["httpd", "-f", "-p", "8080"]
    environment: [PORT=8080]
    healthcheck:
      test: ["CMD", "wget", "-q", "-O-", "http://localhost:8080/"]
      interval: 1s
      timeout: 2s
      retries: 5
      start_period: 3s
    mem_limit: 64m
    <<: *common
    cap_add: [NET_BIND_SERVICE]
    cap_drop: [ALL]
  cache:
    image: busybox:local
    entrypoint: /bin/sh -c
    command: "nc -lk -p 6379"
    depends_on: [web]
    deploy:
      resources:
        limits: {cpus: "0.25", memory: 32M}
`

func TestComposeLoads(t *testing.T) {
	dir := t.TempDir()
	td := writeTask(t, dir, "t", composeTask(goodCompose))
	r := Load(dir, "ds", Options{})
	if len(r.Errs()) != 0 || len(r.Tasks) != 1 {
		t.Fatalf("%v", r.Problems)
	}
	for _, p := range r.Problems {
		t.Logf("warning: %v", p)
	}
	task := r.Tasks[0]
	if task.Compose != "ds/t/environment/docker-compose.yaml" || task.Build != td+"/environment/main" || task.Dockerfile != "Dockerfile.main" || task.Image != "" {
		t.Fatalf("main: compose %q build %q dockerfile %q image %q", task.Compose, task.Build, task.Dockerfile, task.Image)
	}
	if want := map[string]string{"A": "toml", "B": "dflt"}; !reflect.DeepEqual(task.Env, want) {
		t.Errorf("env %v, want %v (task.toml's wins)", task.Env, want)
	}
	if task.Workdir != "/app" {
		t.Errorf("workdir %q: task.toml's wins", task.Workdir)
	}
	want := []sandbox.Service{
		{Name: "cache", Image: "busybox:local", Entrypoint: []string{"/bin/sh", "-c"}, Command: []string{"nc", "-lk", "-p", "6379"},
			Env: map[string]string{}, DependsOn: map[string]string{"web": "service_started"}, CPUs: 0.25, Memory: 32 << 20},
		{Name: "web", Build: td + "/environment/web", Command: []string{"httpd", "-f", "-p", "8080"},
			Env: map[string]string{"PORT": "8080"}, CapAdd: []string{"NET_BIND_SERVICE"},
			Healthcheck: &sandbox.Healthcheck{Test: []string{"CMD", "wget", "-q", "-O-", "http://localhost:8080/"},
				Interval: time.Second, Timeout: 2 * time.Second, StartPeriod: 3 * time.Second, Retries: 5},
			CPUs: 0.5, Memory: 64 << 20},
	}
	// compose splits a string command as a shell would (compose-go's rule).
	if !reflect.DeepEqual(task.Services, want) {
		t.Errorf("services\n got %+v\nwant %+v", task.Services, want)
	}
	var warned bool
	for _, p := range r.Problems {
		warned = warned || strings.Contains(p.Error(), "UNSET_IN_HOST")
	}
	if !warned {
		t.Errorf("no warning for the host variable: %v", r.Problems)
	}
}

func TestComposeRefused(t *testing.T) {
	const head = "services:\n  main:\n    image: x\n"
	cases := []struct{ name, compose, want string }{
		{"privileged", head + "  db:\n    image: y\n    privileged: true\n", "ds/t/environment/docker-compose.yaml:6: services.db.privileged: privileged containers are refused"},
		{"host network", head + "  db:\n    image: y\n    network_mode: host\n", ":6: services.db.network_mode: a service's network_mode is refused"},
		{"pid", head + "    pid: host\n", ":4: services.main.pid: sharing the host's"},
		{"ipc", head + "  db:\n    image: y\n    ipc: host\n", ":6: services.db.ipc:"},
		{"bind mount", head + "  db:\n    image: y\n    volumes: [\"/etc:/host-etc\"]\n", ":6: services.db.volumes: volumes are not supported: bind mounts of host paths are refused"},
		{"ports", head + "  db:\n    image: y\n    ports: [\"8080:80\"]\n", ":6: services.db.ports: publishing ports on the host is refused"},
		{"unknown key", head + "    stop_signal: SIGINT\n", ":4: services.main.stop_signal: not a compose service key Steward honours"},
		{"top networks", head + "networks:\n  back: {}\n", ":4: networks: top-level networks are not supported"},
		{"build args", "services:\n  main:\n    build:\n      context: .\n      args: {A: b}\n", ":5: services.main.build.args: only build.context and build.dockerfile"},
		{"deploy", head + "  db:\n    image: y\n    deploy:\n      replicas: 2\n", ":7: services.db.deploy.replicas: not supported"},
		{"outside", "services:\n  main:\n    build: ../..\n", ":3: services.main.build: context"},
		{"no main", "services:\n  web:\n    image: x\n", ":1: services: no service main"},
		{"host env", head + "    environment: [HOME]\n", "services.main.environment.HOME: takes its value from the host's environment"},
		{"condition", head + "    depends_on:\n      db: {condition: service_completed_successfully}\n  db:\n    image: y\n", "services.main.depends_on: condition \"service_completed_successfully\""},
		{"main cap_add", head + "    cap_add: [NET_ADMIN]\n", ":4: services.main.cap_add: main's capabilities"},
		{"service cap_add SYS_ADMIN", head + "  db:\n    image: y\n    cap_add: [NET_BIND_SERVICE, SYS_ADMIN]\n", ":6: services.db.cap_add: capability SYS_ADMIN is refused"},
		{"service cap_add CAP_SYS_MODULE", head + "  db:\n    image: y\n    cap_add: [cap_sys_module]\n", "capability cap_sys_module is refused"},
		{"invalid", "services:\n  main:\n    image: [1, 2]\n", "ds/t/environment/docker-compose.yaml: invalid compose file"},
		{"env_file", head + "    env_file: /etc/passwd\n", ":4: services.main.env_file: env_file is not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTask(t, dir, "t", composeTask(c.compose))
			r := Load(dir, "ds", Options{})
			var got []string
			found := false
			for _, p := range r.Errs() {
				got = append(got, p.Error())
				found = found || strings.Contains(p.Error(), c.want)
			}
			if !found || len(r.Tasks) != 0 {
				t.Fatalf("want %q, got %q (%d tasks)", c.want, got, len(r.Tasks))
			}
		})
	}
}
