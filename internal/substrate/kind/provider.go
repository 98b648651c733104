package kind

import (
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
)

// clusterProvider is what the substrate asks of kind; tests stand in for it.
type clusterProvider interface {
	Create(name string, spec createSpec) error
	List() ([]string, error)
	ExportKubeConfig(name, path string) error
	Delete(name, kubeconfig string) error
}

// createSpec is one cluster to create.
type createSpec struct {
	Config     *v1alpha4.Cluster
	Kubeconfig string
	// WaitForReady is kind's wait for the control plane to turn Ready. The substrate passes
	// 0, which kind skips (waitforready.go:47-50 at v0.33.0): with the default CNI disabled no
	// node turns Ready before the platform's CNI runs, and kind would poll for the whole wait,
	// then return nil anyway (waitforready.go:87-92).
	WaitForReady time.Duration
}

// kindProvider is kind's own provider, driving the docker CLI.
type kindProvider struct{ p *kindcluster.Provider }

func (k kindProvider) Create(name string, spec createSpec) error {
	return k.p.Create(name,
		kindcluster.CreateWithV1Alpha4Config(spec.Config),
		kindcluster.CreateWithKubeconfigPath(spec.Kubeconfig),
		kindcluster.CreateWithWaitForReady(spec.WaitForReady),
		kindcluster.CreateWithDisplayUsage(false),
		kindcluster.CreateWithDisplaySalutation(false))
}

func (k kindProvider) List() ([]string, error) { return k.p.List() }

func (k kindProvider) ExportKubeConfig(name, path string) error {
	return k.p.ExportKubeConfig(name, path, false)
}

func (k kindProvider) Delete(name, kubeconfig string) error { return k.p.Delete(name, kubeconfig) }

// ensureProvider sets kind's own provider unless a test gave one.
func (s *Substrate) ensureProvider() {
	if s.provider != nil {
		return
	}
	if s.opts.provider != nil {
		s.provider = s.opts.provider
		return
	}
	s.provider = kindProvider{p: kindcluster.NewProvider(kindcluster.ProviderWithDocker())}
}
