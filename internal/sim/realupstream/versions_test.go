package realupstream_test

import (
	"fmt"
	"testing"

	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// The lane check holds a sim lane's clusters to assumptions.SimTenantVersions; the sim renders what
// the chart `make tools` kept offers. They must be the same offer, release for release, or a
// lane the check accepts could be refused by the chart (or the other way round).
func TestTheLaneCheckKnowsWhatTheSimsChartOffers(t *testing.T) {
	b := findBuild(t)
	got, err := b.ChartVersions()
	if err != nil {
		t.Fatal(err)
	}
	want := assumptions.SimTenantVersions()
	if fmt.Sprint(got) != fmt.Sprint(want.Offered) {
		t.Fatalf("the chart in %s offers %v; assumptions.SimTenantVersions (%s) says %v", b.ChartDir(), got, want.Revision, want.Offered)
	}
	if want.Revision != "v"+b.Component("cozystack").Version && want.Revision != b.Component("cozystack").Version {
		t.Errorf("upstream.SimCozystack is %s, the tools keep cozystack %s", want.Revision, b.Component("cozystack").Version)
	}
}
