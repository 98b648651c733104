package faults

import (
	"strings"
	"testing"
)

func TestParseSelectsFaultsAndTargets(t *testing.T) {
	s, err := Parse("disk-import-refused@md0, cluster-dns-mismatch,apiserver-transient")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		fault  Name
		pool   string
		kairos bool
		want   bool
	}{
		{DiskImportRefused, "md0", false, true},
		{DiskImportRefused, "kairos", true, false}, // narrowed to md0
		{ClusterDNSMismatch, "md0", false, false},  // Kairos-only by default
		{ClusterDNSMismatch, "kairos", true, true},
		{NodeTainted, "md0", false, false}, // not selected
	}
	for _, c := range cases {
		if got := s.Active(c.fault, c.pool, c.kairos); got != c.want {
			t.Errorf("Active(%s, %s, kairos=%v) = %v", c.fault, c.pool, c.kairos, got)
		}
	}
	if !s.Selected(APIServerTransient) || s.String() != "apiserver-transient,cluster-dns-mismatch,disk-import-refused@md0" {
		t.Fatalf("set %q", s.String())
	}
}

func TestParseRefusesUnknownFaults(t *testing.T) {
	_, err := Parse("disk-import-refused,disk-on-fire")
	if err == nil || !strings.Contains(err.Error(), `"disk-on-fire" is not a sim fault`) || !strings.Contains(err.Error(), "node-tainted") {
		t.Fatalf("want the catalogue named, got %v", err)
	}
}

// Every fault says what it does and which upstream signal it imitates (or that it is sim only).
func TestCatalogueSaysWhatEachFaultImitates(t *testing.T) {
	for _, f := range Catalogue() {
		if f.Effect == "" || f.Imitates == "" {
			t.Errorf("%s: effect %q, imitates %q", f.Name, f.Effect, f.Imitates)
		}
	}
}

// A controller fault names a controller the sim runs, where other faults name a pool.
func TestControllerFaultsNameAController(t *testing.T) {
	s, err := Parse("controller-killed@virt-controller,controller-killed@cdi-controller,controller-crashloop@capk")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Targets(ControllerKilled), ","); got != "virt-controller,cdi-controller" {
		t.Fatalf("controller-killed targets %q", got)
	}
	for _, bad := range []string{"controller-killed", "controller-crashloop@md0"} {
		_, err := Parse(bad)
		if err == nil || !strings.Contains(err.Error(), "names the controller after @") || !strings.Contains(err.Error(), "virt-controller") {
			t.Errorf("Parse(%q) = %v, want the controllers listed", bad, err)
		}
	}
}
