package report

import "testing"

// The footer names Steward's own version and commit as written (the
// release's check reads it); anything else in the field is escaped.
func TestFooterKeepsTheCommit(t *testing.T) {
	for v, want := range map[string]string{
		"v9.9.9-test (0123456789ab)": "<sub>steward v9.9.9-test (0123456789ab)</sub>\n",
		"dev":                        "<sub>steward dev</sub>\n",
		"<img src=x> (0123456789ab)": "<sub>steward " + MD("<img src=x> (0123456789ab)", 80) + "</sub>\n",
	} {
		if got := footer(&Report{Version: v}); got != want {
			t.Errorf("%q: %q, want %q", v, got, want)
		}
	}
}
