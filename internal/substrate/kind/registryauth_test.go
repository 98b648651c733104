package kind

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/diag"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

const testPassword = "canary-registry-password-5f1c"

func testAuth() *RegistryAuth {
	return &RegistryAuth{Registry: "registry.example:5000/pr-4911/cozystack", Username: "robot$e2e", Password: testPassword}
}

// Registry credentials reach every node's kubelet through a docker config.json in the run's work
// folder, readable by the run's user only and mounted read-only where the kubelet reads one, and
// the operator through a kubernetes.io/dockerconfigjson Secret the apiserver accepts; nothing the
// run writes into its artifacts holds them, raw or in base64.
func TestRegistryCredentialsReachTheNodesAndNeverTheArtifacts(t *testing.T) {
	fake := newFakeKind(t)
	l := pinned(t, "kubernetes")
	l.Kind.Workers = 1
	var log bytes.Buffer
	work, artifacts := t.TempDir(), t.TempDir()
	auth := testAuth()
	s, err := New(l, Options{Options: substrate.Options{WorkDir: work, Artifacts: artifacts, Log: &log}, provider: fake, RegistryAuth: auth, Host: fakeHost()})
	if err != nil {
		t.Fatal(err)
	}
	s.ensureProvider()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.Preflight(ctx) // writes preflight.txt; the platform source is not the point here
	if _, err := s.bringUp(ctx); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}

	path := filepath.Join(work, kubeletDockerConfigFile)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kubelet docker config: %v %v", st, err)
	}
	var cfg struct {
		Auths map[string]struct{ Auth string } `json:"auths"`
	}
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.Auths["registry.example:5000"].Auth != auth.auth() {
		t.Fatalf("docker config %s: %v", data, err)
	}
	for _, n := range fake.specs[0].Config.Nodes {
		found := false
		for _, m := range n.ExtraMounts {
			found = found || (m.HostPath == path && m.ContainerPath == assumptions.KubeletDockerConfig && m.Readonly)
		}
		if !found {
			t.Errorf("node %s does not mount the credentials at %s: %+v", n.Role, assumptions.KubeletDockerConfig, n.ExtraMounts)
		}
	}
	pre, _ := os.ReadFile(filepath.Join(artifacts, "substrate", "preflight.txt"))
	if !strings.Contains(string(pre), "ok      registry   a login for registry.example:5000 goes to every node's kubelet") {
		t.Errorf("preflight.txt:\n%s", pre)
	}
	if err := diag.Scan(artifacts, auth.Secrets()...); err != nil {
		t.Fatalf("the artifacts hold the credentials: %v", err)
	}
	if strings.Contains(log.String(), testPassword) {
		t.Fatalf("the log holds the password:\n%s", log.String())
	}

	// The operator's Secret passes the apiserver's own validation of a dockerconfigjson Secret.
	c, err := cluster.New("kind", fake.api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": assumptions.PlatformSourceSecretNamespace}}}
	real, err := install.NewApplier(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := real.Apply(ctx, []install.Object{{Source: "test", Obj: ns}}); err != nil {
		t.Fatal(err)
	}
	a, err := install.NewApplier(c)
	if err != nil {
		t.Fatal(err)
	}
	a.DryRun = true
	if err := a.Apply(ctx, []install.Object{{Source: "test", Obj: auth.PullSecret()}}); err != nil {
		t.Fatalf("the apiserver refuses the operator's pull Secret: %v", err)
	}
	bad := auth.PullSecret()
	bad.Object["data"] = map[string]any{".dockerconfigjson": "bm90IGpzb24="} // "not json"
	if err := a.Apply(ctx, []install.Object{{Source: "test", Obj: bad}}); err == nil {
		t.Fatal("the apiserver took a dockerconfigjson Secret that is not JSON: the check above proves nothing")
	}
}

// A login without its registry, or half a login, is refused when the substrate is made.
func TestRegistryCredentialsNeedTheirRegistry(t *testing.T) {
	for want, a := range map[string]RegistryAuth{
		"E2E_PLATFORM_REGISTRY is not set":                                              {Username: "u", Password: "p"},
		"E2E_PLATFORM_REGISTRY_USERNAME and E2E_PLATFORM_REGISTRY_PASSWORD go together": {Registry: "ghcr.io/x", Password: "p"},
	} {
		_, err := New(pinned(t, "kubernetes"), Options{RegistryAuth: &a})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "p\"") {
			t.Errorf("%+v: %v", a, err)
		}
	}
	if RegistryAuthFromEnv(func(string) string { return "" }) != nil {
		t.Error("no login in the environment gave one")
	}
}

// The login reaches the kubelets and the operator, not CDI's importer nor tenant workers: the
// preflight says so, and refuses a lane whose Kairos pool imports its disk from the registry the
// run logs in to, naming the lane file and the pool.
func TestRegistryLoginDoesNotReachTheImporter(t *testing.T) {
	l := pinned(t, "kubernetes")
	a := RegistryAuth{Registry: "registry.example.com/cozy", Username: "u", Password: "p"}
	f := registryFinding(l, a)
	if !f.OK || !strings.Contains(f.Detail, "not to CDI's importer, which pulls the Kairos pools' disks with none, nor to tenant workers") {
		t.Fatalf("shipped lane: %+v", f)
	}
	l.Classes = append(l.Classes, lane.Class{Name: "kairos-private", OS: "kairos", Image: "registry.example.com/cozy/kairos-worker-v1.35@sha256:" + strings.Repeat("a", 64), KubernetesVersion: "v1.35.4"})
	l.Pools = append(l.Pools, lane.Pool{Name: "private", Cluster: l.Pools[0].Cluster, Class: "kairos-private", Replicas: 1})
	f = registryFinding(l, a)
	want := "pools[" + strconv.Itoa(len(l.Pools)-1) + "] (private) imports its disk registry.example.com/cozy/kairos-worker-v1.35@sha256:"
	if f.OK || !strings.Contains(f.Detail, want) || !strings.Contains(f.Detail, "from registry.example.com, which the run logs in to: the importer would pull it without that login") ||
		!strings.Contains(f.Detail, l.File) {
		t.Fatalf("want %q refused, got %+v", want, f)
	}
}
