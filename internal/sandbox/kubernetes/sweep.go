package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/steward-evals/steward/internal/sandbox"
)

// SweepResult counts what Sweep removed and kept.
type SweepResult struct {
	Pods int // removed
	Kept int // pods of live runs (or of runs this process cannot judge), untouched
	Runs []string
}

// deadRun applies the Docker provider's liveness rule to a pod's
// annotations: a run is dead when its lock file is not held; a lock path is
// judged only in the scope it was written in (this host), a pod without a
// lock annotation or of another scope is left alone.
func deadRun(judge sandbox.Liveness, scope string, ann map[string]string) bool {
	lock := ann[AnnotationLock]
	if lock == "" || judge == nil {
		return false
	}
	if s, ok := ann[AnnotationLockScope]; ok && s != scope {
		return false
	}
	dead, err := judge.Judge(lock, ann[AnnotationOwner])
	return err == nil && dead
}

// Sweep deletes every Steward pod in the namespace whose run is dead.
func (p *Provider) Sweep(ctx context.Context, w io.Writer) (SweepResult, error) {
	if w == nil {
		w = io.Discard
	}
	var res SweepResult
	pods, err := p.cs.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: sandbox.LabelManaged + "=true"})
	if err != nil {
		return res, sandbox.InfraError(fmt.Errorf("sweep: list pods: %w", err))
	}
	seen := map[string]bool{}
	var errs []error
	for _, pod := range pods.Items {
		if !deadRun(p.opts.Liveness, p.scope, pod.Annotations) {
			res.Kept++
			continue
		}
		run := pod.Labels[sandbox.LabelRun]
		if !seen[run] {
			seen[run] = true
			res.Runs = append(res.Runs, run)
		}
		if err := p.deletePod(ctx, pod.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Pods++
		fmt.Fprintf(w, "sweep: removed pod %s of dead run %s\n", pod.Name, run)
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}
	return res, nil
}
