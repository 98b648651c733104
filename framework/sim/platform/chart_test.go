package platform

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/framework/sim/upstream"
)

// The values the stand-in renders as the chart's are the pinned chart's own: its
// nodeHealthCheck and talos values, and the MachineHealthCheck conditions its template fixes.
func TestChartValuesAreThePinnedChartsOwn(t *testing.T) {
	b, err := upstream.Find(cptest.Tools(t))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	data, err := os.ReadFile(filepath.Join(b.ChartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		NodeHealthCheck struct {
			MaxUnhealthy       string `json:"maxUnhealthy"`
			NodeStartupTimeout string `json:"nodeStartupTimeout"`
		} `json:"nodeHealthCheck"`
		Talos struct {
			Version             string `json:"version"`
			SchematicID         string `json:"schematicID"`
			InstallerRepository string `json:"installerRepository"`
		} `json:"talos"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	h := ChartHealthTimers()
	if d, err := time.ParseDuration(v.NodeHealthCheck.NodeStartupTimeout); err != nil || d != h.NodeStartupTimeout || v.NodeHealthCheck.MaxUnhealthy != h.MaxUnhealthy {
		t.Errorf("the chart's nodeHealthCheck is %+v; ChartHealthTimers says %s, %s", v.NodeHealthCheck, h.MaxUnhealthy, h.NodeStartupTimeout)
	}
	if v.Talos.Version != talosVersion || v.Talos.SchematicID != talosSchematicID || v.Talos.InstallerRepository != talosInstallerRepo {
		t.Errorf("the chart's talos values are %+v", v.Talos)
	}
	tmpl, err := os.ReadFile(filepath.Join(b.ChartDir(), "templates", "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := "  unhealthyConditions:\n  - type: Ready\n    status: Unknown\n    timeout: " + seconds(h.ReadyUnknownTimeout) +
		"\n  - type: Ready\n    status: \"False\"\n    timeout: " + seconds(h.ReadyFalseTimeout) + "\n"
	if !strings.Contains(string(tmpl), want) {
		t.Errorf("templates/cluster.yaml does not render the unhealthy conditions ChartHealthTimers says:\n%s", want)
	}
}

func seconds(d time.Duration) string { return strconv.Itoa(int(d.Seconds())) + "s" }
