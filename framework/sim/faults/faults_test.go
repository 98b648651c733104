package faults

import (
	"strings"
	"testing"
)

func TestParseSelectsFaultsAndTargets(t *testing.T) {
	s, err := Parse("disk-import-refused@md0, hostname-mismatch,apiserver-transient")
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
		{HostnameMismatch, "md0", false, false},    // Kairos-only by default
		{HostnameMismatch, "kairos", true, true},
		{NodeTainted, "md0", false, false}, // not selected
	}
	for _, c := range cases {
		if got := s.Active(c.fault, c.pool, c.kairos); got != c.want {
			t.Errorf("Active(%s, %s, kairos=%v) = %v", c.fault, c.pool, c.kairos, got)
		}
	}
	if !s.Selected(APIServerTransient) || s.String() != "apiserver-transient,disk-import-refused@md0,hostname-mismatch" {
		t.Fatalf("set %q", s.String())
	}
}

func TestParseRefusesUnknownFaults(t *testing.T) {
	_, err := Parse("disk-import-refused,disk-on-fire")
	if err == nil || !strings.Contains(err.Error(), `"disk-on-fire" is not a sim fault`) || !strings.Contains(err.Error(), "node-tainted") {
		t.Fatalf("want the catalogue named, got %v", err)
	}
}

// Every failing fault names a known class and a join stage; passing faults name neither.
func TestCatalogueIsConsistent(t *testing.T) {
	for _, f := range Catalogue() {
		if f.Passes != (f.Class == "") || f.Passes != (f.Stage == "") {
			t.Errorf("%s: passes=%v but class %q stage %q", f.Name, f.Passes, f.Class, f.Stage)
		}
		if !f.Passes && (!f.Class.Known() || f.Stage.Index() < 0) {
			t.Errorf("%s: unknown class %q or stage %q", f.Name, f.Class, f.Stage)
		}
	}
}
