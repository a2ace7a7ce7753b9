package sandbox

import "testing"

func TestBudgetPrecedence(t *testing.T) {
	docker := Capacity{Limit: 8, Source: "docker default: 2 × 4 CPUs"}
	small := Capacity{Limit: 3, Source: "small default"}
	local := Capacity{Limit: 1, Exclusive: true, Source: "local default"}
	cases := []struct {
		name         string
		flag, config int
		caps         map[string]Capacity
		allExclusive bool
		budget       int
		src          string
	}{
		{"flag beats config and providers", 5, 7, map[string]Capacity{"docker": docker}, false, 5, "from flag"},
		{"config beats providers", 0, 7, map[string]Capacity{"docker": docker}, false, 7, "from config"},
		{"provider default", 0, 0, map[string]Capacity{"docker": docker}, false, 8, "from docker default: 2 × 4 CPUs"},
		{"tightest provider wins", 0, 0, map[string]Capacity{"docker": docker, "small": small}, false, 3, "from small default"},
		{"exclusive provider bounds nothing else", 0, 0, map[string]Capacity{"docker": docker, "local": local}, false, 8, "from docker default: 2 × 4 CPUs"},
		{"every task exclusive: one", 0, 0, map[string]Capacity{"local": local}, true, 1, "from local default"},
		{"exclusive provider, some task not: unbounded", 0, 0, map[string]Capacity{"local": local}, false, 0, "from local default"},
		{"unlimited provider: unbounded", 0, 0, map[string]Capacity{"x": {}}, false, 0, "from the providers' defaults"},
		{"elastic provider says why", 0, 0, map[string]Capacity{"kubernetes": {Source: "kubernetes: elastic, no quota"}}, false, 0, "from kubernetes: elastic, no quota"},
		{"no providers known yet (dry)", 0, 0, nil, false, 0, "from the providers' defaults"},
		{"flag with exclusive tasks", 2, 0, map[string]Capacity{"local": local}, true, 2, "from flag"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, src := Budget(c.flag, c.config, c.caps, c.allExclusive)
			if b != c.budget || src != c.src {
				t.Fatalf("Budget = %d %q, want %d %q", b, src, c.budget, c.src)
			}
		})
	}
}
