package kubernetes

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/steward-evals/steward/internal/sandbox"
)

// SourceUnlimited is the Capacity source when nothing in the cluster bounds the budget.
const SourceUnlimited = "kubernetes: unlimited, the ramp governs"

// Capacity is unlimited (the ramp governs) unless the namespace's
// ResourceQuotas bound how many sandboxes of these specs fit: then the
// tightest quota wins and names itself as the source. The relay pod's share
// is taken off first.
func (p *Provider) Capacity(ctx context.Context, specs []sandbox.Spec) (sandbox.Capacity, error) {
	if p.perRun {
		// A namespace made for the run has no quota (nothing bounds it but
		// max_sandboxes); it need not exist yet (the plan is sized first).
		return sandbox.Capacity{Source: PerRunSource}, nil
	}
	qs, err := p.cs.CoreV1().ResourceQuotas(p.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return sandbox.Capacity{Source: SourceUnlimited + " (quota of namespace " + p.ns + " not readable)"}, nil
		}
		return sandbox.Capacity{}, sandbox.InfraError(fmt.Errorf("read resource quotas of namespace %s: %w", p.ns, err))
	}
	return QuotaCapacity(p.ns, qs.Items, specs, p.relayRunning())
}

func (p *Provider) relayRunning() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.relay != nil
}

// QuotaCapacity computes how many sandboxes of the largest of specs fit in
// what the quotas leave (hard - used), after the relay pod unless it already
// runs (and is thus in used).
func QuotaCapacity(ns string, quotas []corev1.ResourceQuota, specs []sandbox.Spec, relayCounted bool) (sandbox.Capacity, error) {
	cpus, mem := DefaultCPUs, int64(0)
	for i, s := range specs {
		c, m := s.CPUs, s.Memory
		if c <= 0 {
			c = DefaultCPUs
		}
		if m <= 0 {
			m = DefaultMemory
		}
		if i == 0 || c > cpus {
			cpus = c
		}
		if m > mem {
			mem = m
		}
	}
	if mem == 0 {
		mem = DefaultMemory
	}
	per := map[corev1.ResourceName]resource.Quantity{
		corev1.ResourcePods:           *resource.NewQuantity(1, resource.DecimalSI),
		corev1.ResourceRequestsCPU:    quantityCPU(cpus),
		corev1.ResourceLimitsCPU:      quantityCPU(cpus),
		corev1.ResourceCPU:            quantityCPU(cpus),
		corev1.ResourceRequestsMemory: quantityMem(mem),
		corev1.ResourceLimitsMemory:   quantityMem(mem),
		corev1.ResourceMemory:         quantityMem(mem),
	}
	relay := map[corev1.ResourceName]resource.Quantity{
		corev1.ResourcePods:           *resource.NewQuantity(1, resource.DecimalSI),
		corev1.ResourceRequestsCPU:    quantityCPU(RelayCPUs),
		corev1.ResourceLimitsCPU:      quantityCPU(RelayCPUs),
		corev1.ResourceCPU:            quantityCPU(RelayCPUs),
		corev1.ResourceRequestsMemory: quantityMem(RelayMemory),
		corev1.ResourceLimitsMemory:   quantityMem(RelayMemory),
		corev1.ResourceMemory:         quantityMem(RelayMemory),
	}
	best := -1
	src := ""
	sort.Slice(quotas, func(i, j int) bool { return quotas[i].Name < quotas[j].Name })
	for _, q := range quotas {
		hard := q.Status.Hard
		if len(hard) == 0 {
			hard = q.Spec.Hard
		}
		names := make([]string, 0, len(hard))
		for n := range hard {
			names = append(names, string(n))
		}
		sort.Strings(names)
		for _, n := range names {
			rn := corev1.ResourceName(n)
			need, ok := per[rn]
			if !ok {
				continue
			}
			left := hard[rn].DeepCopy()
			if used, ok := q.Status.Used[rn]; ok {
				left.Sub(used)
			}
			if !relayCounted {
				left.Sub(relay[rn])
			}
			fit := int(math.Floor(float64(left.MilliValue()) / float64(need.MilliValue())))
			if fit < 0 {
				fit = 0
			}
			if best < 0 || fit < best {
				best = fit
				used := q.Status.Used[rn]
				src = fmt.Sprintf("quota %s/%s: %s %s (used %s) ÷ %s per sandbox", ns, q.Name, n, fmtQ(hard[rn]), fmtQ(used), fmtQ(need))
			}
		}
	}
	if best < 0 {
		return sandbox.Capacity{Source: SourceUnlimited}, nil
	}
	if best == 0 {
		return sandbox.Capacity{}, fmt.Errorf("the kubernetes namespace quota leaves room for no sandbox (%s): raise the quota or lower the task's cpus/memory", src)
	}
	return sandbox.Capacity{Limit: best, Source: src}, nil
}

func fmtQ(q resource.Quantity) string {
	s := q.String()
	return strings.TrimSpace(s)
}
