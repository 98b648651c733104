package platform

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// The values the stand-in renders as the chart's are the pinned chart's own: its
// nodeHealthCheck and talos values, and the MachineHealthCheck conditions its template fixes.
func TestChartValuesAreThePinnedChartsOwn(t *testing.T) {
	b, err := realupstream.Find(cptest.Tools(t))
	if err != nil {
		testkit.Unavailable(t, err)
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

// The platform stand-in's render of apps with a pool on a class other than talos is a model of
// cozystack/cozystack#4911, which no served release carries. When the pinned chart (the lane's
// Cozystack release, make tools) knows NodeGroupClass, the model must give way to the chart:
// this test fails then.
func TestThePinnedChartKnowsNoNodeGroupClass(t *testing.T) {
	b, err := realupstream.Find(cptest.Tools(t))
	if err != nil {
		testkit.Unavailable(t, err)
	}
	err = filepath.WalkDir(b.ChartDir(), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(strings.ToLower(string(data)), "nodegroupclass") {
			t.Errorf("%s mentions NodeGroupClass: the pinned Cozystack %s carries #4911; render every app through the chart and retire the model (internal/sim/platform)",
				p, b.Component("cozystack").Version)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
