package attempt

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
)

// Limits of a task's artifacts (the files an agent leaves).
const (
	MaxArtifactFiles = 20      // files kept per attempt; more are listed, not kept
	MaxArtifactFile  = 1 << 20 // bytes per file
	MaxArtifactTotal = 4 << 20 // bytes per attempt
)

// ArtifactStore holds collected artifacts by attempt seq until the
// supervisor takes them (in a worker: until they go out with the result).
// Its zero value is ready to use.
type ArtifactStore struct {
	mu   sync.Mutex
	arts map[int][]record.Artifact
}

// Put keeps attempt seq's artifacts (nil: forgets them).
func (s *ArtifactStore) Put(seq int, arts []record.Artifact) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.arts == nil {
		s.arts = map[int][]record.Artifact{}
	}
	if arts == nil {
		delete(s.arts, seq)
		return
	}
	s.arts[seq] = arts
}

// Take returns, and forgets, attempt seq's artifacts.
func (s *ArtifactStore) Take(seq int) []record.Artifact {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.arts[seq]
	delete(s.arts, seq)
	return a
}

// TakeArtifacts returns, and forgets, what attempt seq's sandbox left
// (collected while it was up; nil when nothing).
func (e *Executor) TakeArtifacts(seq int) []record.Artifact { return e.artifacts().Take(seq) }

func (e *Executor) artifacts() *ArtifactStore { return &e.arts }

// collectArtifacts copies out the files matching the task's artifact globs
// (relative to the workdir, expanded by the sandbox's shell), regular files
// only: symlinks are refused. It runs while the attempt's sandbox is still
// up, whatever the attempt's outcome, and keeps what it found for the
// supervisor.
//
// extra are artifacts collected already (a Harbor trial's /logs), kept beside.
func (e *Executor) collectArtifacts(ctx context.Context, sb sandbox.Sandbox, a *plan.Attempt, extra []record.Artifact) {
	t := e.x.Plan.Tasks[a.Task].Task
	if len(t.Artifacts) == 0 || ctx.Err() != nil {
		e.artifacts().Put(a.Seq, extra)
		return
	}
	// A sandbox judged by a target match is still settled (docker: paused)
	// and runs no command: end the agent's processes, as the grader does,
	// before listing what it left.
	if q, ok := sb.(quiescer); ok {
		if err := q.Quiesce(ctx); err != nil {
			e.artifacts().Put(a.Seq, append([]record.Artifact{{Path: strings.Join(t.Artifacts, " "), Note: "not collected: " + err.Error()}}, extra...))
			return
		}
	}
	e.artifacts().Put(a.Seq, append(gatherArtifacts(ctx, sb, t.Artifacts), extra...))
}

// quiescer is a sandbox that must end its settled processes before it runs
// a command again (sandbox/docker).
type quiescer interface{ Quiesce(context.Context) error }

// artifactScript lists what the globs match, one "F:path" (regular file)
// or "L:path" (symlink) per line. The globs are checked by the eval set's
// validation (CheckArtifactGlob): plain file-name characters and wildcards.
func artifactScript(globs []string) string {
	return `for f in ` + strings.Join(globs, " ") + `; do if [ -L "$f" ]; then printf 'L:%s\n' "$f"; elif [ -f "$f" ]; then printf 'F:%s\n' "$f"; fi; done`
}

func gatherArtifacts(ctx context.Context, sb sandbox.Sandbox, globs []string) []record.Artifact {
	return gatherUnder(ctx, sb, globs, "")
}

// gatherUnder is gatherArtifacts for globs relative to the workdir (root
// "") or absolute under root (a Harbor trial's /logs).
func gatherUnder(ctx context.Context, sb sandbox.Sandbox, globs []string, root string) []record.Artifact {
	res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: artifactScript(globs), Timeout: 30 * time.Second, MaxOutput: 256 << 10})
	if err != nil {
		return []record.Artifact{{Path: strings.Join(globs, " "), Note: "not collected: " + err.Error()}}
	}
	seen := map[string]bool{}
	var out []record.Artifact
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		kind, p, ok := strings.Cut(line, ":")
		if !ok || p == "" || seen[p] {
			continue
		}
		seen[p] = true
		clean := path.Clean(p)
		if root != "" {
			if !strings.HasPrefix(clean, root+"/") {
				continue
			}
		} else if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			continue
		}
		a := record.Artifact{Path: clean}
		if kind == "L" {
			a.Note = "a symlink: refused"
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	var total int64
	kept := 0
	for i := range out {
		a := &out[i]
		if a.Note != "" {
			continue
		}
		if kept >= MaxArtifactFiles {
			a.Note = fmt.Sprintf("not kept: more than %d files", MaxArtifactFiles)
			continue
		}
		data, err := sb.CopyOut(ctx, a.Path)
		if err != nil {
			a.Note = "not copied: " + err.Error()
			continue
		}
		a.Size = int64(len(data))
		switch {
		case a.Size > MaxArtifactFile:
			a.Note = fmt.Sprintf("not kept: larger than %d KiB", MaxArtifactFile>>10)
		case total+a.Size > MaxArtifactTotal:
			a.Note = fmt.Sprintf("not kept: the attempt's artifacts reached %d MiB", MaxArtifactTotal>>20)
		default:
			a.Data = data
			if a.Data == nil {
				a.Data = []byte{}
			}
			total += a.Size
			kept++
		}
	}
	return out
}
