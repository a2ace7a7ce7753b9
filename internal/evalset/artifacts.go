package evalset

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// MaxArtifactGlobs bounds a task's artifacts list.
const MaxArtifactGlobs = 32

// CheckArtifactGlob accepts a glob relative to the workdir made of plain
// file-name characters and the wildcards * ? [ ] (expanded by the sandbox's
// shell, so nothing else may reach it), with no ".." and no leading "-" or
// "~" (an option, a home directory).
func CheckArtifactGlob(g string) error {
	switch {
	case strings.TrimSpace(g) == "":
		return errors.New("empty glob")
	case strings.HasPrefix(g, "/"):
		return fmt.Errorf("%q is absolute: artifacts are relative to the workdir", g)
	case strings.HasPrefix(g, "-"), strings.HasPrefix(g, "~"):
		return fmt.Errorf("%q starts with %q", g, g[:1])
	}
	for _, r := range g {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("._-/*?[]!+@%,=~:", r):
		default:
			return fmt.Errorf("%q: the character %q is not allowed in an artifact glob (letters, digits, . _ - / + @ %% , = ~ : and the wildcards * ? [ ])", g, r)
		}
	}
	for _, seg := range strings.Split(g, "/") {
		if seg == ".." {
			return fmt.Errorf("%q leaves the workdir (..)", g)
		}
	}
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("%q is not a valid glob: %v", g, err)
	}
	return nil
}
