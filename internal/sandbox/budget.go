package sandbox

import "sort"

// Budget is the sandbox budget (C2, C3) and where it comes from (the PLAN line's
// "from …"): --max-concurrency, then max_sandboxes, then the tightest
// provider default among providers that bound the fleet. An exclusive
// provider bounds nothing but itself, unless every task is exclusive (1).
// 0 is unbounded.
func Budget(flag, config int, caps map[string]Capacity, allExclusive bool) (int, string) {
	switch {
	case flag > 0:
		return flag, "from flag"
	case config > 0:
		return config, "from config"
	}
	budget, src := 0, "from the providers' defaults"
	names := make([]string, 0, len(caps))
	for n := range caps {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 0 && caps[names[0]].Source != "" {
		src = "from " + caps[names[0]].Source
	}
	// The tightest default among providers that bound the fleet; an
	// exclusive provider (local) bounds it to 1 only when every task is exclusive.
	for _, n := range names {
		c := caps[n]
		if c.Exclusive {
			if allExclusive && budget == 0 {
				budget, src = 1, "from "+c.Source
			}
			continue
		}
		if c.Limit > 0 && (budget == 0 || c.Limit < budget) {
			budget, src = c.Limit, "from "+c.Source
		}
	}
	if budget == 0 {
		// An elastic provider (kubernetes) says why nothing bounds the fleet.
		for _, n := range names {
			if c := caps[n]; !c.Exclusive && c.Limit == 0 && c.Source != "" {
				src = "from " + c.Source
			}
		}
	}
	return budget, src
}
