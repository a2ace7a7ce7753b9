package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/steward-evals/steward/internal/sandbox"
)

// SweepResult counts what Sweep removed and kept.
type SweepResult struct {
	Pods       int // removed
	Namespaces int // per-run namespaces of dead runs deleted (their pods go with them)
	Kept       int // pods and namespaces of live runs (or of runs this process cannot judge), untouched
	Runs       []string
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

// Sweep deletes the per-run namespaces of dead runs (when this user may list
// namespaces) and, with a configured namespace, every Steward pod there
// whose run is dead. The same liveness rule judges both.
func (p *Provider) Sweep(ctx context.Context, w io.Writer) (SweepResult, error) {
	if w == nil {
		w = io.Discard
	}
	var res SweepResult
	seen := map[string]bool{}
	addRun := func(run string) {
		if !seen[run] {
			seen[run] = true
			res.Runs = append(res.Runs, run)
		}
	}
	var errs []error
	if err := p.sweepNamespaces(ctx, w, &res, addRun); err != nil {
		errs = append(errs, err)
	}
	if !p.perRun {
		// (a per-run namespace holds only its own live run's pods)
		if err := p.sweepPods(ctx, w, &res, addRun); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}
	return res, nil
}

func (p *Provider) sweepPods(ctx context.Context, w io.Writer, res *SweepResult, addRun func(string)) error {
	pods, err := p.cs.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: sandbox.LabelManaged + "=true"})
	if err != nil {
		return sandbox.InfraError(fmt.Errorf("list pods: %w", err))
	}
	var errs []error
	for _, pod := range pods.Items {
		if !deadRun(p.opts.Liveness, p.scope, pod.Annotations) {
			res.Kept++
			continue
		}
		run := pod.Labels[sandbox.LabelRun]
		addRun(run)
		if err := p.deletePod(ctx, pod.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Pods++
		fmt.Fprintf(w, "sweep: removed pod %s of dead run %s\n", pod.Name, run)
	}
	return errors.Join(errs...)
}

// sweepNamespaces deletes the per-run namespaces whose run is dead. A user
// who may not list namespaces (a namespaced Role) made none: nothing to do.
func (p *Provider) sweepNamespaces(ctx context.Context, w io.Writer, res *SweepResult, addRun func(string)) error {
	nss, err := p.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sandbox.LabelManaged + "=true," + labelRole + "=" + roleNamespace})
	if err != nil {
		if apierrors.IsForbidden(err) && !p.perRun {
			return nil
		}
		return sandbox.InfraError(fmt.Errorf("list namespaces: %w", err))
	}
	var errs []error
	for _, ns := range nss.Items {
		if ns.DeletionTimestamp != nil {
			continue // already going
		}
		if !deadRun(p.opts.Liveness, p.scope, ns.Annotations) {
			res.Kept++
			continue
		}
		run := ns.Labels[sandbox.LabelRun]
		addRun(run)
		if err := p.deleteNamespace(ctx, ns.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Namespaces++
		fmt.Fprintf(w, "sweep: deleted namespace %s of dead run %s\n", ns.Name, run)
	}
	return errors.Join(errs...)
}
