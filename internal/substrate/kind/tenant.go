package kind

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// TenantLBLabel marks the LoadBalancer Services the harness makes for tenant apiservers; its
// value is the tenant control plane's name.
const TenantLBLabel = "cozystack-e2e.io/tenant-api-lb"

// tenantAPIPort is the port a Kamaji tenant apiserver serves on.
const tenantAPIPort = 6443

// TenantAccess is the kind substrate's cluster.Cluster.TenantConfig: the platform writes tenant
// kubeconfigs that name the in-cluster Service, which the runner cannot reach. It creates (or
// finds) a LoadBalancer Service for the tenant apiserver pods, waits for MetalLB to give it an
// address on the kind network, and points the config there, keeping TLS verified: ServerName is
// the Service's in-cluster name, which is in the apiserver certificate's SANs.
func TenantAccess(c *cluster.Cluster, log io.Writer) func(ctx context.Context, namespace, secretName string, cfg *rest.Config) (*rest.Config, error) {
	return func(ctx context.Context, namespace, secretName string, cfg *rest.Config) (*rest.Config, error) {
		cp := controlPlaneName(secretName)
		svc := tenantLB(namespace, cp)
		err := c.Client.Create(ctx, svc)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("tenant %s/%s: LoadBalancer Service %s: %w", namespace, cp, svc.Name, err)
		}
		ip, err := waitLBAddress(ctx, c, namespace, svc.Name, log)
		if err != nil {
			return nil, fmt.Errorf("tenant %s/%s: %w", namespace, cp, err)
		}
		out := rest.CopyConfig(cfg)
		out.Host = fmt.Sprintf("https://%s:%d", ip, tenantAPIPort)
		out.TLSClientConfig.ServerName = cp + "." + namespace + ".svc"
		out.TLSClientConfig.Insecure = false
		return out, nil
	}
}

// controlPlaneName is R for the kubeconfig Secrets Kamaji writes (R-admin-kubeconfig, R-kubeconfig).
func controlPlaneName(secretName string) string {
	for _, suffix := range []string{"-admin-kubeconfig", "-kubeconfig"} {
		if r, ok := strings.CutSuffix(secretName, suffix); ok {
			return r
		}
	}
	return secretName
}

func tenantLB(namespace, cp string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: cp + "-e2e-lb", Namespace: namespace, Labels: map[string]string{TenantLBLabel: cp}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"kamaji.clastix.io/name": cp},
			Ports:    []corev1.ServicePort{{Name: "kube-apiserver", Port: tenantAPIPort, TargetPort: intstr.FromInt32(tenantAPIPort), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// waitLBAddress watches the Service until its load balancer has an IP.
func waitLBAddress(ctx context.Context, c *cluster.Cluster, namespace, name string, log io.Writer) (string, error) {
	var left time.Duration
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	if log != nil {
		fmt.Fprintf(log, "waiting up to %s for LoadBalancer Service %s/%s to get an address (MetalLB)\n", left.Round(time.Second), namespace, name)
	}
	start := time.Now()
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	svcs := c.Kube.CoreV1().Services(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return svcs.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return svcs.Watch(ctx, o)
		},
	}
	var ip string
	check := func(obj any) bool {
		s, ok := obj.(*corev1.Service)
		if !ok {
			return false
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ip = in.IP
				return true
			}
		}
		return false
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Service{}, func(store cache.Store) (bool, error) {
		for _, o := range store.List() {
			if check(o) {
				return true, nil
			}
		}
		return false, nil
	}, func(ev watch.Event) (bool, error) { return check(ev.Object), nil })
	if err != nil {
		return "", fmt.Errorf("LoadBalancer Service %s/%s: stuck for %s without an address (is MetalLB's pool cozy-e2e there and announcing?): %w",
			namespace, name, time.Since(start).Round(time.Second), err)
	}
	return ip, nil
}
