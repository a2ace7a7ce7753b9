package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/steward-evals/steward/internal/sandbox"
)

// NamespacePerRun, as the namespace setting (kubernetes.namespace or
// STEWARD_KUBE_NAMESPACE), gives every run a namespace of its own,
// steward-<run>: created when the run prepares, holding the relay and every
// sandbox pod of the run, deleted when the run ends (a dead run's by the
// sweep). It is not a namespace name.
const NamespacePerRun = "per-run"

// roleNamespace is the role label of a per-run namespace.
const roleNamespace = "namespace"

// DefaultServiceAccountWait bounds how long a new namespace may lack its
// "default" service account (the cluster's serviceaccount controller makes
// it; the ServiceAccount admission plugin refuses pods until it exists).
const DefaultServiceAccountWait = 60 * time.Second

// RunNamespace is the per-run namespace of run: steward-<run> as a DNS-1123 label.
func RunNamespace(run string) string {
	s := nameBad.ReplaceAllString(strings.ToLower(run), "-")
	s = strings.Trim(s, "-")
	if len(s) > 55 {
		s = strings.TrimRight(s[:55], "-")
	}
	return "steward-" + s
}

// PerRunSource is the Capacity source in per-run mode: the namespace is new,
// so no ResourceQuota bounds the budget (max_sandboxes does, or nothing).
const PerRunSource = SourceUnlimited + " (a per-run namespace has no ResourceQuota: set max_sandboxes to bound it)"

// canCreateNamespaces asks the API server whether this user may create
// namespaces (a SelfSubjectAccessReview, which every authenticated user may make).
func (p *Provider) canCreateNamespaces(ctx context.Context) (bool, string, error) {
	r, err := p.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "namespaces"}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	why := r.Status.Reason
	if r.Status.EvaluationError != "" {
		why = strings.TrimSpace(why + " " + r.Status.EvaluationError)
	}
	return r.Status.Allowed, why, nil
}

// ensureNamespace makes the run's namespace in per-run mode (once per
// provider). The instance that creates it owns it and deletes it in
// Finalize; other instances of the run (workers) find it there and adopt it.
// Nothing is copied into it: no secret, no service account token, no pull
// secret.
func (p *Provider) ensureNamespace(ctx context.Context) error {
	if !p.perRun {
		return nil
	}
	p.nsMu.Lock()
	defer p.nsMu.Unlock()
	if p.nsReady {
		return nil
	}
	m := p.meta(p.ns, "", roleNamespace, nil)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns, Labels: m.Labels, Annotations: m.Annotations}}
	delete(ns.Annotations, AnnotationTask)
	_, err := p.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	switch {
	case err == nil:
		p.nsOwned = true
		fmt.Fprintf(p.log, "kubernetes: created namespace %s for run %s\n", p.ns, p.opts.RunID)
	case apierrors.IsAlreadyExists(err):
		cur, gerr := p.cs.CoreV1().Namespaces().Get(ctx, p.ns, metav1.GetOptions{})
		if gerr != nil {
			return sandbox.InfraError(fmt.Errorf("read namespace %s: %w", p.ns, gerr))
		}
		if cur.Labels[sandbox.LabelManaged] != "true" || cur.Labels[sandbox.LabelRun] != labelValue(p.opts.RunID) {
			return fmt.Errorf("namespace %s exists and is not this run's (labels %v): Steward never uses a namespace it did not make in per-run mode", p.ns, cur.Labels)
		}
		if cur.DeletionTimestamp != nil {
			return sandbox.InfraError(fmt.Errorf("namespace %s of this run is being deleted", p.ns))
		}
	case apierrors.IsForbidden(err):
		return fmt.Errorf("kubernetes namespace: %s needs the right to create namespaces, which this kubeconfig's user lacks (see docs/kubernetes.md, RBAC for per-run namespaces): %w", NamespacePerRun, err)
	default:
		return sandbox.InfraError(fmt.Errorf("create namespace %s: %w", p.ns, err))
	}
	if err := p.waitServiceAccount(ctx); err != nil {
		return err
	}
	p.nsReady = true
	return nil
}

// waitServiceAccount waits until the namespace's "default" service account
// exists: clusters with the ServiceAccount admission plugin refuse pods
// until the serviceaccount controller made it. A user who may not read
// service accounts is not held up (pod creation then says what is wrong).
func (p *Provider) waitServiceAccount(ctx context.Context) error {
	wait := p.opts.ServiceAccountWait
	if wait <= 0 {
		wait = DefaultServiceAccountWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	sel := fields.OneTermEqualSelector("metadata.name", "default").String()
	for {
		l, err := p.cs.CoreV1().ServiceAccounts(p.ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		switch {
		case apierrors.IsForbidden(err):
			return nil
		case err != nil && ctx.Err() != nil:
			return p.saTimeout(wait)
		case err != nil:
			return sandbox.InfraError(fmt.Errorf("list service accounts of namespace %s: %w", p.ns, err))
		case len(l.Items) > 0:
			return nil
		}
		w, err := p.cs.CoreV1().ServiceAccounts(p.ns).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: l.ResourceVersion})
		if err != nil {
			if ctx.Err() != nil {
				return p.saTimeout(wait)
			}
			return sandbox.InfraError(fmt.Errorf("watch service accounts of namespace %s: %w", p.ns, err))
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return p.saTimeout(wait)
		}
		// the watch ended early (the API server closes watches): list again
	}
}

func (p *Provider) saTimeout(wait time.Duration) error {
	return sandbox.InfraError(fmt.Errorf("namespace %s has no \"default\" service account after %s: is the cluster's kube-controller-manager (serviceaccount controller) running?", p.ns, wait))
}

// deleteNamespace deletes the run's namespace (its pods go with it); a
// namespace already gone is fine. It does not wait for the deletion to
// finish: the cluster's namespace controller empties it.
func (p *Provider) deleteNamespace(ctx context.Context, name string) error {
	bg := metav1.DeletePropagationBackground
	err := p.cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return sandbox.InfraError(fmt.Errorf("delete namespace %s: %w", name, err))
	}
	return nil
}
