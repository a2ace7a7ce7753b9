#!/usr/bin/python3
"""Reference values for internal/stats and internal/score tests.

Run with Debian's python3 (SciPy 1.10, statsmodels 0.13), from the repo root:

    /usr/bin/python3 internal/stats/testdata/reference.py

It prints Go table literals; the tests hold a copy of them. Everything that
is not a library call (the permutation distributions, Newcombe's interval,
the clustered rate) is written here from the definitions, independently of
the Go code.
"""
import itertools
import math
from fractions import Fraction

import scipy
import statsmodels
from scipy.stats import binomtest, norm
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint


def g(x):
    return repr(float(x))


print("// scipy", scipy.__version__, "statsmodels", statsmodels.__version__)

# --- Wilson ---------------------------------------------------------------
print("\n// Wilson: k, n, confidence, lo, hi (statsmodels proportion_confint method='wilson')")
for k, n, conf in [(0, 10, .95), (10, 10, .95), (0, 1, .95), (1, 1, .95), (3, 7, .95),
                   (31, 40, .95), (32, 40, .95), (1, 20, .9), (19, 20, .99), (250, 500, .95),
                   (2.5, 7.5, .95), (59, 61.3, .95), (0, 2.7, .95), (4.2, 4.2, .8)]:
    lo, hi = proportion_confint(k, n, alpha=1 - conf, method="wilson")
    print("{%s, %s, %s, %s, %s}," % (g(k), g(n), g(conf), g(lo), g(hi)))

# --- NormalQuantile -------------------------------------------------------
print("\n// NormalQuantile: p, scipy.stats.norm.ppf(p)")
for p in [0.5, 0.975, 0.995, 0.95, 0.9, 0.025, 0.001, 1e-6, 0.999999]:
    print("{%s, %s}," % (g(p), g(norm.ppf(p))))

# --- BinomialTail ---------------------------------------------------------
print("\n// BinomialTail: x, n, binomtest(x, n, 0.5, alternative='greater').pvalue")
for x, n in [(0, 5), (1, 1), (5, 5), (3, 5), (7, 10), (12, 14), (1, 20), (30, 40), (60, 100), (0, 0)]:
    p = binomtest(x, n, 0.5, alternative="greater").pvalue if n > 0 else 1.0
    print("{%d, %d, %s}," % (x, n, g(p)))

# --- McNemar --------------------------------------------------------------
print("\n// McNemar: both pass, head only, base only, neither; pRegress, pImprove")
for a, hb, bb, d in [(30, 2, 8, 0), (10, 5, 5, 10), (0, 0, 6, 0), (36, 0, 0, 4), (20, 12, 2, 16),
                     (12, 3, 9, 16), (1, 7, 1, 12)]:
    # regression: base passed, head failed (bb of them) out of hb+bb discordant
    m = hb + bb
    pr = binomtest(bb, m, 0.5, alternative="greater").pvalue if m else 1.0
    pi = binomtest(hb, m, 0.5, alternative="greater").pvalue if m else 1.0
    print("{%d, %d, %d, %d, %s, %s}," % (a, hb, bb, d, g(pr), g(pi)))


# --- stratified permutation, brute force ------------------------------------
def mean(p, n):
    return Fraction(p, n)


def all_(p, n):
    return Fraction(int(p == n))


def sqrt_(p, n):
    return math.sqrt(p / n)


def brute(samples, red):
    """samples: (sharedPass, sharedN, headPass, headN, basePass, baseN, extraPass, extraN).
    Under the null every own attempt of a sample is an i.i.d. draw, so given
    the pooled own passes every 0/1 vector with that many passes is equally
    likely; with extra attempts only vectors whose first-look attempts
    (shared and own) disagree could have been observed. Enumerate them all."""
    per = []
    obs = 0
    for sp, sn, hp, hn, bp, bn, ep, en in samples:
        def change(hv, bv, ev):
            return red(sp + sum(hv) + sum(ev), sn + hn + en) - red(sp + sum(bv), sn + bn)
        obs += change([1] * hp + [0] * (hn - hp), [1] * bp + [0] * (bn - bp), [1] * ep + [0] * (en - ep))
        total = hp + bp + ep
        first = sp + hp + bp
        select = en > 0 and 0 < first < sn + hn + bn
        vals = []
        for v in itertools.product([0, 1], repeat=hn + bn + en):
            if sum(v) != total:
                continue
            hv, bv, ev = v[:hn], v[hn:hn + bn], v[hn + bn:]
            f = sp + sum(hv) + sum(bv)
            if select and not (0 < f < sn + hn + bn):
                continue
            vals.append(change(hv, bv, ev))
        per.append(vals)
    le = ge = cnt = 0
    eps = 1e-9
    for combo in itertools.product(*per):
        s = sum(combo)
        cnt += 1
        if s <= obs + (eps if isinstance(s, float) else 0):
            le += 1
        if s >= obs - (eps if isinstance(s, float) else 0):
            ge += 1
    # every vector is equally likely within a sample, so counts are weights
    w = 1
    return Fraction(le, cnt), Fraction(ge, cnt)


cases = [
    ("3 v 3, mean", "mean", [(0, 0, 3, 3, 1, 3, 0, 0), (0, 0, 2, 3, 3, 3, 0, 0), (0, 0, 0, 3, 2, 3, 0, 0)]),
    ("3 v 3, regression, mean", "mean", [(0, 0, 1, 3, 3, 3, 0, 0), (0, 0, 0, 3, 2, 3, 0, 0), (0, 0, 2, 3, 3, 3, 0, 0), (0, 0, 1, 3, 2, 3, 0, 0)]),
    ("unequal and shared, mean", "mean", [(1, 1, 1, 2, 3, 3, 0, 0), (0, 0, 0, 1, 2, 4, 0, 0), (0, 0, 2, 2, 0, 2, 0, 0), (2, 2, 0, 0, 0, 0, 0, 0), (0, 0, 1, 3, 1, 1, 0, 0)]),
    ("unequal, all", "all", [(0, 0, 2, 2, 1, 3, 0, 0), (0, 0, 1, 2, 3, 3, 0, 0), (0, 0, 0, 2, 3, 3, 0, 0), (0, 0, 2, 2, 3, 3, 0, 0)]),
    ("extra after 1 v 1, mean", "mean", [(0, 0, 0, 1, 1, 1, 0, 2), (0, 0, 0, 1, 1, 1, 1, 2), (0, 0, 1, 1, 0, 1, 2, 2), (0, 0, 0, 1, 1, 1, 0, 4), (0, 0, 1, 1, 1, 1, 0, 0)]),
    ("extra after 3 v 3 with shared, mean", "mean", [(1, 1, 1, 2, 2, 3, 1, 2), (0, 0, 3, 3, 1, 3, 2, 2), (0, 0, 0, 3, 2, 3, 0, 2)]),
]
print("\n// PairedTest exact: name, reducer, samples {sharedPass, sharedN, headPass, headN, basePass, baseN, extraPass, extraN}, pRegress, pImprove (brute force)")
for name, red, ss in cases:
    pr, pi = brute(ss, mean if red == "mean" else all_)
    print('{"%s", "%s", %s, %s, %s},' % (name, red, "[][8]int{" + ", ".join("{" + ", ".join(map(str, s)) + "}" for s in ss) + "}", g(pr), g(pi)))

print("\n// PairedTest Monte Carlo (off the grid): exact p-values by brute force")
mc = [("sqrt reducer", "sqrt", [(0, 0, 0, 2, 2, 2, 0, 0), (0, 0, 1, 2, 2, 2, 0, 0), (0, 0, 1, 2, 1, 2, 0, 0), (0, 0, 0, 2, 1, 2, 0, 0), (0, 0, 2, 2, 1, 2, 0, 0), (0, 0, 0, 2, 2, 2, 0, 0)])]
for name, red, ss in mc:
    pr, pi = brute(ss, sqrt_)
    print('{"%s", "%s", %s, %s, %s},' % (name, red, "[][8]int{" + ", ".join("{" + ", ".join(map(str, s)) + "}" for s in ss) + "}", g(pr), g(pi)))


# mean reducer, 41 head v 67 base attempts (denominator 2747 > 2520: off the
# grid, Monte Carlo), and 7 v 11 (1/77: on the grid, exact); too many vectors
# to list, so each sample's distribution is its hypergeometric
# law written out from binomial coefficients, convolved exactly.
def hyper_dist(hp, hn, bp, bn):
    T, N = hp + bp, hn + bn
    out = {}
    for x in range(max(0, T - bn), min(hn, T) + 1):
        w = Fraction(math.comb(T, x) * math.comb(N - T, hn - x), math.comb(N, hn))
        v = Fraction(x, hn) - Fraction(T - x, bn)
        out[v] = out.get(v, 0) + w
    return out


for ss in [[(30, 41, 55, 67), (20, 41, 40, 67), (35, 41, 60, 67)],
           [(5, 7, 10, 11), (3, 7, 6, 11), (7, 7, 11, 11), (2, 7, 8, 11), (6, 7, 7, 11), (4, 7, 9, 11)]]:
    dist = {Fraction(0): Fraction(1)}
    obs = 0
    for hp, hn, bp, bn in ss:
        obs += Fraction(hp, hn) - Fraction(bp, bn)
        d = hyper_dist(hp, hn, bp, bn)
        nd = {}
        for a, pa in dist.items():
            for b, pb in d.items():
                nd[a + b] = nd.get(a + b, 0) + pa * pb
        dist = nd
    pr = sum(p for v, p in dist.items() if v <= obs)
    pi = sum(p for v, p in dist.items() if v >= obs)
    print('// mean reducer: samples {headPass, headN, basePass, baseN}', ss, "pRegress", g(pr), "pImprove", g(pi))

# --- Holm -----------------------------------------------------------------
print("\n// Holm: p, multipletests(p, method='holm')[1]")
for ps in [[0.01, 0.04, 0.03, 0.005], [0.5], [0.02, 0.02, 0.9], [0.001, 0.2, 0.04, 0.04, 0.3, 0.011], [0.6, 0.7, 0.01]]:
    adj = multipletests(ps, method="holm")[1]
    print("{[]float64{%s}, []float64{%s}}," % (", ".join(map(g, ps)), ", ".join(map(g, adj))))

# --- PassAtK --------------------------------------------------------------
print("\n// PassAtK: n, c, k, 1 - comb(n-c,k)/comb(n,k)")
for n, c, k in [(1, 0, 1), (1, 1, 1), (5, 0, 1), (5, 2, 1), (5, 2, 2), (5, 2, 3), (5, 2, 4), (10, 3, 5), (10, 9, 2), (3, 1, 2), (200, 7, 10), (20, 0, 5)]:
    print("{%d, %d, %d, %s}," % (n, c, k, g(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))))

# --- alpha spending -------------------------------------------------------
print("\n// SpendPocock: alpha, t, alpha*ln(1+(e-1)t)")
for a, t in [(0.05, 0), (0.05, 0.25), (0.05, 0.5), (0.05, 1), (0.1, 1 / 3)]:
    print("{%s, %s, %s}," % (g(a), g(t), g(a * math.log(1 + (math.e - 1) * t))))
print("// LookAlpha(0.05, j, 4), j = 1..4")
print(", ".join(g(0.05 * (math.log(1 + (math.e - 1) * j / 4) - math.log(1 + (math.e - 1) * (j - 1) / 4))) for j in range(1, 5)))


# --- RateOf, clustered ----------------------------------------------------
def rate_of(scores, attempts, conf):
    n = len(scores)
    m = sum(scores) / n
    v = sum((s - m) ** 2 for s in scores) / n ** 2
    cap = max(attempts, n)
    if v > 1e-15:
        neff = m * (1 - m) / v
    elif 1e-12 < m < 1 - 1e-12:
        neff = cap
    else:
        neff = n
    neff = min(max(neff, n), cap)
    lo, hi = proportion_confint(m * neff, neff, alpha=1 - conf, method="wilson")
    return m, neff, lo, hi


print("\n// RateOf clustered: passes per sample, attempts per sample; mean, neff, lo, hi")
rate_cases = [([3, 2, 3, 0, 1, 3, 3, 2], 3), ([3, 3, 3, 3, 3, 3, 3, 3, 3, 2], 3), ([1, 1, 2, 1, 1], 2), ([0, 0, 0, 1, 0, 0], 5), ([2, 2, 2], 4)]
for passes, k in rate_cases:
    m, neff, lo, hi = rate_of([p / k for p in passes], k * len(passes), 0.95)
    print("{[]int{%s}, %d, %s, %s, %s, %s}," % (", ".join(map(str, passes)), k, g(m), g(neff), g(lo), g(hi)))


# --- Newcombe method 10 ---------------------------------------------------
def wilson(k, n, conf):
    return proportion_confint(k, n, alpha=1 - conf, method="wilson")


def newcombe10(a, b, c, d, conf=0.95):
    """Newcombe (1998) method 10 for p1 - p2, p1 = (a+b)/n, p2 = (a+c)/n:
    Wilson limits for each margin, square-and-add with the corrected phi."""
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, conf)
    l2, u2 = wilson(a + c, n, conf)
    A = (a + b) * (c + d) * (a + c) * (b + d)
    B = a * d - b * c
    C = B - n / 2 if B > n / 2 else (0 if B >= 0 else B)
    phi = C / math.sqrt(A) if A > 0 else 0
    D = p1 - p2
    lo = D - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    hi = D + math.sqrt((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    return D, max(-1, lo), min(1, hi)


print("\n// Newcombe method 10: a (both pass), b (head only), c (base only), d (neither), conf; delta, lo, hi")
for a, b, c, d, conf in [(20, 12, 2, 16, .95), (1, 1, 7, 12, .95), (8, 3, 1, 2, .95), (7, 25, 2, 68, .95),
                         (36, 12, 2, 0, .95), (30, 2, 8, 0, .95), (0, 0, 6, 4, .95), (40, 0, 0, 0, .95), (15, 3, 9, 13, .9)]:
    D, lo, hi = newcombe10(a, b, c, d, conf)
    print("{%d, %d, %d, %d, %s, %s, %s, %s}," % (a, b, c, d, g(conf), g(D), g(lo), g(hi)))


def mover_scores(h, b, ha, ba, conf):
    mh, _, lh, uh = rate_of(h, ha, conf)
    mb, _, lb, ub = rate_of(b, ba, conf)
    n = len(h)
    xh, xb = sum(h) / n, sum(b) / n
    sxy = sum((x - xh) * (y - xb) for x, y in zip(h, b))
    sxx = sum((x - xh) ** 2 for x in h)
    syy = sum((y - xb) ** 2 for y in b)
    if sxx < 1e-15 or syy < 1e-15:
        r = 0
    else:
        sxy = sxy - 0.5 if sxy > 0.5 else (0 if sxy >= 0 else sxy)
        r = sxy / math.sqrt(sxx * syy)
    d = mh - mb
    l1, u1, l2, u2 = mh - lh, uh - mh, mb - lb, ub - mb
    return d, d - math.sqrt(max(0, l1 * l1 + u2 * u2 - 2 * r * l1 * u2)), d + math.sqrt(max(0, u1 * u1 + l2 * l2 - 2 * r * u1 * l2))


print("\n// MOVER, 3 v 3 attempts, mean reducer: head passes, base passes; delta, lo, hi")
for hp, bp in [([3, 2, 3, 0, 1, 3, 3, 2, 2, 3], [3, 3, 3, 1, 1, 3, 2, 3, 3, 3]), ([1, 2, 0, 3, 3, 1], [2, 2, 1, 3, 2, 0])]:
    d, lo, hi = mover_scores([p / 3 for p in hp], [p / 3 for p in bp], 3 * len(hp), 3 * len(bp), 0.95)
    print("{[]int{%s}, []int{%s}, %s, %s, %s}," % (", ".join(map(str, hp)), ", ".join(map(str, bp)), g(d), g(lo), g(hi)))
