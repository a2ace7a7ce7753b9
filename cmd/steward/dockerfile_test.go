package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The action's Dockerfile parses and resolves its stages with the legacy
// builder (DOCKER_BUILDKIT=0, the default of Docker Engine before 23), as
// `uses: ./` builds it on such a runner: "FROM --platform=$BUILDPLATFORM"
// failed there ("failed to parse platform"), BUILDPLATFORM being BuildKit's
// (issue 23 item 10). Nothing can be pulled here, so every stage's image is
// replaced by a local one built from scratch; what is under test is the
// Dockerfile's global ARGs and FROM lines, with their platform expressions,
// as the legacy builder evaluates them.
func TestDockerfileWithoutBuildKit(t *testing.T) {
	needDocker(t)
	src, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	probe := "steward-dockerfile-probe:" + randHex(4)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Probe"), []byte("FROM scratch\nCOPY f /f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	legacy := append(os.Environ(), "DOCKER_BUILDKIT=0")
	build := func(file, tag string) (string, error) {
		args := []string{"build", "-q", "-f", filepath.Join(dir, file)}
		if tag != "" {
			args = append(args, "-t", tag)
		}
		c := exec.Command("docker", append(args, dir)...)
		c.Env = legacy
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if out, err := build("Probe", probe); err != nil {
		t.Fatalf("build the probe image: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", probe).Run() })

	// The skeleton: the global ARGs, then each FROM line with its image
	// replaced by the probe (scratch stays scratch), each stage holding a
	// file, and the final stage copying from every named stage.
	fromRe := regexp.MustCompile(`^FROM\s+((?:--\S+\s+)*)(\S+)(\s+AS\s+(\S+))?\s*$`)
	var b strings.Builder
	var stages []string
	seenFrom := false
	sc := bufio.NewScanner(strings.NewReader(string(src)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "ARG ") && !seenFrom:
			b.WriteString(line + "\n")
		case strings.HasPrefix(line, "FROM "):
			seenFrom = true
			m := fromRe.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("unparsed FROM line: %s", line)
			}
			image := probe
			if m[2] == "scratch" {
				image = "scratch"
			}
			b.WriteString("FROM " + m[1] + image + m[3] + "\n")
			if m[4] != "" {
				stages = append(stages, m[4])
				b.WriteString("COPY f /stage-" + m[4] + "\n")
			} else {
				for _, s := range stages {
					b.WriteString("COPY --from=" + s + " /stage-" + s + " /stage-" + s + "\n")
				}
			}
		}
	}
	if len(stages) == 0 || !strings.Contains(b.String(), "--platform=") {
		t.Fatalf("the Dockerfile's stages were not found:\n%s", b.String())
	}
	if err := os.WriteFile(filepath.Join(dir, "Skeleton"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := build("Skeleton", "")
	if err != nil {
		t.Fatalf("the Dockerfile's stages do not build with the legacy builder: %v\n%s\nskeleton:\n%s", err, out, b.String())
	}
	if id := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]); strings.HasPrefix(id, "sha256:") {
		_ = exec.Command("docker", "rmi", "-f", id).Run()
	}
}
