// Package cluster is the harness's handle on one Kubernetes cluster: a REST config whose
// transport retries transient API errors, a controller-runtime client that knows the Cluster
// API, KubeVirt and CDI types, and a typed clientset for logs and events. It plays the part of
// Cluster API's ClusterProxy.
package cluster

//lint:file-ignore SA1019 the scheme serves Cluster API v1beta1 because the providers Cozystack runs (CAPK v0.1.10, CABPT v0.6.12) still read and write it.

import (
	"context"
	"fmt"
	"net/http"
	"os"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Scheme knows every typed kind the harness reads: core, CRDs, Cluster API (v1beta1 and
// v1beta2), KubeVirt and CDI. Kinds without Go types here (Kamaji, CAPK, the bootstrap
// providers, the platform's kinds) are read as unstructured.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(clusterv1beta1.AddToScheme(s))
	utilruntime.Must(kubevirtv1.AddToScheme(s))
	utilruntime.Must(cdiv1.AddToScheme(s))
	return s
}

// Cluster is one cluster the harness talks to.
type Cluster struct {
	// Name is how reports refer to it ("management", "tenant kubernetes-t1").
	Name string
	// KubeconfigPath is a kubeconfig file for people and tools (kubectl); may be empty.
	KubeconfigPath string
	REST           *rest.Config
	Client         client.Client
	Kube           kubernetes.Interface
	// Retries counts the transient API errors absorbed by this cluster's clients.
	Retries *Retries
	// TenantConfig turns a tenant kubeconfig as the platform writes it into one this machine can
	// use (the kind substrate reaches tenant apiservers through a LoadBalancer). Nil: use as is.
	TenantConfig func(ctx context.Context, namespace, name string, cfg *rest.Config) (*rest.Config, error)
	// TenantUnanswered says what the substrate sees keeping the address of the tenant whose
	// kubeconfig is secret namespace/name from answering (the kind substrate: nothing announces
	// its LoadBalancer address); empty when it sees nothing. Nil: the substrate cannot tell.
	TenantUnanswered func(ctx context.Context, namespace, name string) string
	// Unanswered is TenantUnanswered bound to this tenant cluster (FromSecret sets it).
	Unanswered func(ctx context.Context) string
}

// New builds a Cluster from a REST config; every client it makes retries transient errors.
func New(name string, cfg *rest.Config) (*Cluster, error) {
	cfg = rest.CopyConfig(cfg)
	retries := &Retries{}
	prev := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return RetryTransient(rt, DefaultRetryPolicy(), retries)
	}
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: client: %w", name, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: clientset: %w", name, err)
	}
	return &Cluster{Name: name, REST: cfg, Client: c, Kube: kube, Retries: retries}, nil
}

// FromKubeconfig builds a Cluster from a kubeconfig file.
func FromKubeconfig(name, path string) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: kubeconfig %s: %w", name, path, err)
	}
	c, err := New(name, cfg)
	if err != nil {
		return nil, err
	}
	c.KubeconfigPath = path
	return c, nil
}

// FromSecret builds a Cluster for a tenant from the kubeconfig the platform stores in
// secret namespace/secretName under key, through TenantConfig when the substrate sets one.
// The kubeconfig's bytes never leave memory.
func (c *Cluster) FromSecret(ctx context.Context, name, namespace, secretName, key string) (*Cluster, error) {
	var sec corev1.Secret
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: secretName}, &sec); err != nil {
		return nil, fmt.Errorf("tenant kubeconfig: secret %s/%s: %w", namespace, secretName, err)
	}
	data, ok := sec.Data[key]
	if !ok || len(data) == 0 {
		return nil, fmt.Errorf("tenant kubeconfig: secret %s/%s has no key %q", namespace, secretName, key)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("tenant kubeconfig: secret %s/%s key %s: %w", namespace, secretName, key, err)
	}
	if c.TenantConfig != nil {
		if cfg, err = c.TenantConfig(ctx, namespace, secretName, cfg); err != nil {
			return nil, fmt.Errorf("tenant kubeconfig: secret %s/%s: %w", namespace, secretName, err)
		}
	}
	out, err := New(name, cfg)
	if err != nil {
		return nil, err
	}
	if why := c.TenantUnanswered; why != nil {
		out.Unanswered = func(ctx context.Context) string { return why(ctx, namespace, secretName) }
	}
	return out, nil
}

// WriteKubeconfig writes cfg as a kubeconfig file for people and tools, readable by the owner only.
func WriteKubeconfig(path, contextName string, cfg *rest.Config) error {
	kc := clientcmdapiConfig(contextName, cfg)
	data, err := clientcmd.Write(kc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
