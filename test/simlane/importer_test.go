package simlane

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// importerReplaced: for each importer the sim OOM-killed, the harness's pool events show a new
// importer Pod of that name scheduled after the kill: the real cdi-controller replaced it (CDI
// v1.64.0 pkg/controller/import-controller.go:393-398, 463-473), and the run stayed green.
func importerReplaced(t *testing.T, _ *lane.Lane, _ *faults.Set, art string, obs []simenv.Observation) {
	t.Helper()
	n := 0
	for _, o := range obs {
		if o.Fault != faults.DiskImportOOM {
			continue
		}
		n++
		ns, name, _ := strings.Cut(strings.TrimPrefix(o.Object, "Pod/"), "/")
		if at, ok := scheduledAfter(t, filepath.Join(art, "pools", o.Pool, "events.jsonl"), ns+"/"+name, o.At); ok {
			t.Logf("pool %s: importer %s OOM-killed; CDI's replacement scheduled %s later", o.Pool, name, at.Sub(o.At).Round(time.Millisecond))
		} else {
			t.Errorf("pool %s: importer %s was OOM-killed at %s, and no importer of that name was scheduled after it: CDI did not replace it",
				o.Pool, name, o.At.Format(time.RFC3339Nano))
		}
	}
	if n == 0 {
		t.Errorf("%s: the sim recorded no importer it OOM-killed; the run proves nothing of CDI's replacement", faults.DiskImportOOM)
	}
}

// scheduledAfter finds kube-scheduler's Scheduled event for pod (namespace/name) seen after at.
func scheduledAfter(t *testing.T, path, pod string, at time.Time) (time.Time, bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Errorf("%v", err)
		return time.Time{}, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		var e struct {
			Seen    time.Time `json:"seen"`
			Reason  string    `json:"reason"`
			Message string    `json:"message"`
		}
		if json.Unmarshal(s.Bytes(), &e) != nil || e.Reason != "Scheduled" {
			continue
		}
		// "Successfully assigned <namespace>/<pod> to <node>" (k8s.io/kubernetes v1.35.4
		// pkg/scheduler/schedule_one.go).
		if strings.Contains(e.Message, " "+pod+" ") && e.Seen.After(at) {
			return e.Seen, true
		}
	}
	return time.Time{}, false
}
