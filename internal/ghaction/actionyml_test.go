package ghaction_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/steward-evals/steward/internal/ghaction"
	"github.com/steward-evals/steward/internal/report"
)

type actionYML struct {
	Inputs map[string]struct {
		Description string `yaml:"description"`
		Default     string `yaml:"default"`
	} `yaml:"inputs"`
	Outputs map[string]struct {
		Description string `yaml:"description"`
	} `yaml:"outputs"`
	Runs struct {
		Using      string   `yaml:"using"`
		Image      string   `yaml:"image"`
		Entrypoint string   `yaml:"entrypoint"`
		Args       []string `yaml:"args"`
	} `yaml:"runs"`
}

func readActionYML(t *testing.T) actionYML {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a actionYML
	if err := yaml.Unmarshal(b, &a); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	return a
}

// action.yml declares exactly the inputs Run reads and the outputs it writes.
func TestActionYMLMatchesTheCode(t *testing.T) {
	a := readActionYML(t)
	// No runs.entrypoint: the image's ENTRYPOINT is the binary (an
	// entrypoint naming a file only "worked" against a stray binary in the
	// repository, which is not what the runner runs).
	if a.Runs.Using != "docker" || a.Runs.Image != "Dockerfile" || a.Runs.Entrypoint != "" ||
		strings.Join(a.Runs.Args, " ") != "action" {
		t.Errorf("runs: %+v", a.Runs)
	}
	// Inputs read: record every INPUT_ variable a run asks for.
	asked := map[string]bool{}
	getenv := func(k string) string {
		if name, ok := strings.CutPrefix(k, "INPUT_"); ok {
			asked[strings.ToLower(name)] = true
		}
		return ""
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "out"), nil, 0o644)
	env := ghaction.Env{Getenv: func(k string) string {
		if k == "GITHUB_OUTPUT" {
			return filepath.Join(dir, "out")
		}
		if k == "GITHUB_WORKSPACE" {
			return dir
		}
		return getenv(k)
	}}
	ghaction.Run(context.Background(), env, func(context.Context, ghaction.LaunchOptions) (*report.Report, int, error) {
		return &report.Report{}, 0, nil
	})
	var declared, read []string
	for k := range a.Inputs {
		declared = append(declared, k)
	}
	for k := range asked {
		read = append(read, k)
	}
	sort.Strings(declared)
	sort.Strings(read)
	if strings.Join(declared, " ") != strings.Join(read, " ") {
		t.Errorf("inputs declared in action.yml:\n  %v\nread by the code:\n  %v", declared, read)
	}
	// Outputs written.
	b, err := os.ReadFile(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	var written []string
	for _, m := range regexp.MustCompile(`(?m)^([a-z-]+)<<`).FindAllStringSubmatch(string(b), -1) {
		written = append(written, m[1])
	}
	var outs []string
	for k := range a.Outputs {
		outs = append(outs, k)
	}
	sort.Strings(written)
	sort.Strings(outs)
	if strings.Join(outs, " ") != strings.Join(written, " ") {
		t.Errorf("outputs declared in action.yml:\n  %v\nwritten by the code:\n  %v", outs, written)
	}
	for name, in := range a.Inputs {
		if in.Description == "" {
			t.Errorf("input %s has no description", name)
		}
	}
}

// The Dockerfiles' entrypoint is the binary in exec form, so steward is PID 1
// and gets the runner's signals; the final stage is scratch plus the binary,
// CA certificates and Debian's static busybox with its applets (a POSIX shell
// for local tasks), and runs nothing that needs a shell to build. The two
// files' final stages are the same but for where they copy from.
func TestDockerfiles(t *testing.T) {
	finals := map[string]string{}
	for _, name := range []string{"Dockerfile", "Dockerfile.prebuilt"} {
		b, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if !strings.Contains(s, "\nENTRYPOINT [\"/steward\"]\n") {
			t.Errorf("%s: entrypoint not in exec form", name)
		}
		last := s[strings.LastIndex(s, "\nFROM "):]
		if !strings.HasPrefix(last, "\nFROM scratch\n") {
			t.Errorf("%s: final stage is not FROM scratch", name)
		}
		for _, line := range strings.Split(last, "\n") {
			if strings.HasPrefix(line, "RUN ") && !strings.HasPrefix(line, "RUN [\"/bin/busybox\"") {
				t.Errorf("%s: final stage runs %q (only busybox in exec form)", name, line)
			}
		}
		for _, want := range []string{"/etc/ssl/certs/ca-certificates.crt", "/bin/busybox\n", `"--install", "-s"`, "ENV TMPDIR=/tmp", "VERSION", "COMMIT"} {
			if !strings.Contains(last, want) {
				t.Errorf("%s: final stage lacks %q", name, want)
			}
		}
		var keep []string
		for _, line := range strings.Split(last, "\n") {
			if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "COPY ") {
				keep = append(keep, line)
			}
		}
		finals[name] = strings.Join(keep, "\n")
	}
	if finals["Dockerfile"] != finals["Dockerfile.prebuilt"] {
		t.Errorf("the final stages differ:\nDockerfile:\n%s\nDockerfile.prebuilt:\n%s", finals["Dockerfile"], finals["Dockerfile.prebuilt"])
	}
	b, _ := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	for _, want := range []string{"CGO_ENABLED=0", "internal/version.Version=${VERSION}", "internal/version.Commit=${COMMIT}", "busybox-static"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

// The release workflow publishes what `uses: OWNER/steward@vX` runs: on a
// version tag, a linux/amd64 + linux/arm64 image from Dockerfile with the
// version and commit stamped in, pushed to ghcr.io, and the tag moved to a
// commit whose action.yml names that image by digest (a fixed reference).
func TestReleaseWorkflow(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		On struct {
			Push struct {
				Tags []string `yaml:"tags"`
			} `yaml:"push"`
		} `yaml:"on"`
		Permissions map[string]string `yaml:"permissions"`
		Jobs        map[string]struct {
			Steps []struct {
				Uses string            `yaml:"uses"`
				Run  string            `yaml:"run"`
				With map[string]string `yaml:"with"`
				Env  map[string]string `yaml:"env"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatalf("release.yml: %v", err)
	}
	if len(wf.On.Push.Tags) == 0 || !strings.HasPrefix(wf.On.Push.Tags[0], "v") {
		t.Errorf("release.yml runs on %v, want version tags", wf.On.Push.Tags)
	}
	if wf.Permissions["packages"] != "write" || wf.Permissions["contents"] != "write" {
		t.Errorf("permissions %v", wf.Permissions)
	}
	var built, moved bool
	for _, j := range wf.Jobs {
		for _, s := range j.Steps {
			if strings.HasPrefix(s.Uses, "docker/build-push-action@") {
				built = s.With["platforms"] == "linux/amd64,linux/arm64" && s.With["push"] == "true" && s.With["file"] == "Dockerfile" &&
					strings.Contains(s.With["build-args"], "VERSION=") && strings.Contains(s.With["build-args"], "COMMIT=") && s.With["tags"] != ""
			}
			if strings.HasPrefix(s.Uses, "docker/login-action@") && s.With["registry"] != "ghcr.io" {
				t.Errorf("release.yml logs in to %q, want ghcr.io", s.With["registry"])
			}
			if strings.Contains(s.Run, "image: Dockerfile") && strings.HasPrefix(s.Env["REF"], "docker://") && strings.Contains(s.Env["REF"], "digest") &&
				strings.Contains(s.Run, "git push") {
				moved = true
			}
		}
	}
	if !built || !moved {
		t.Errorf("release.yml: multi-arch build and push %v; tag moved to an action.yml naming the image by digest %v", built, moved)
	}
}

// docs/action.md opens with the workflows users paste: each block headed
// "# .github/workflows/NAME" is that file with `uses: ./` written as
// `uses: steward-evals/steward@v1`, and every workflow that uses the action
// is there. (The runner-faithful test runs the files.)
func TestDocsWorkflowsAreTheShippedOnes(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "action.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n# \\.github/workflows/([a-z0-9-]+\\.yml)\n(.*?)```\n").FindAllStringSubmatch(string(doc), -1)
	shown := map[string]bool{}
	for _, b := range blocks {
		file, err := os.ReadFile(filepath.Join("..", "..", ".github", "workflows", b[1]))
		if err != nil {
			t.Errorf("docs/action.md shows %s: %v", b[1], err)
			continue
		}
		want := strings.ReplaceAll(string(file), "uses: ./ # in your repository: steward-evals/steward@v1", "uses: steward-evals/steward@v1")
		want = regexp.MustCompile(`uses: \./\n`).ReplaceAllString(want, "uses: steward-evals/steward@v1\n")
		if b[2] != want {
			t.Errorf("docs/action.md's %s differs from the file (copy it again)", b[1])
		}
		shown[b[1]] = true
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", ".github", "workflows", "*.yml"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if regexp.MustCompile(`(?m)^\s*(- )?uses: \./`).Match(b) && !shown[filepath.Base(f)] {
			t.Errorf("%s uses the action but docs/action.md does not show it", filepath.Base(f))
		}
	}
	if len(shown) < 4 {
		t.Errorf("docs/action.md shows %d workflows", len(shown))
	}
}
