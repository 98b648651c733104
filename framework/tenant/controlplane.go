package tenant

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// WaitControlPlane waits, inside ctx, until the tenant control plane of names is up and answers,
// and returns a Cluster for it, built from the admin kubeconfig Secret. Up is Kamaji's own word:
// the TenantControlPlane's status.kubernetesResources.version.status is Ready (clastix/kamaji
// api/v1alpha1/tenantcontrolplane_status.go:202-210, computed from the control-plane Deployment,
// internal/resources/k8s_deployment_resource.go:85-101); the admin kubeconfig Secret alone says
// nothing, since Kamaji writes it before that Deployment exists (controllers/resources.go:65,69).
// Then /readyz is asked until it answers, inside the phase. The wait ends at once on a refusal
// (HelmRelease Ready=False with a failure) and on the chart's <release>-awaiting-etcd ConfigMap
// (cozystack/cozystack packages/apps/kubernetes/templates/cluster.yaml:226-244): a tenant without
// a DataStore is a configuration failure of the platform install, not a slow control plane.
func (p Platform) WaitControlPlane(ctx context.Context, names Names) (*cluster.Cluster, error) {
	hr := Ref{GVK: HelmReleaseGVK, Namespace: names.Namespace, Name: names.HelmRelease()}
	tcp := Ref{GVK: TenantControlPlaneGVK, Namespace: names.Namespace, Name: names.ControlPlane()}
	sk := names.AdminKubeconfig()
	sec := Ref{GVK: secretGVK, Namespace: sk.Namespace, Name: sk.Name}
	etcd := Ref{GVK: configMapGVK, Namespace: names.Namespace, Name: names.AwaitingEtcd()}
	what := "tenant control plane " + names.Release()
	err := Wait(ctx, p.Mgmt, WaitOptions{What: what,
		Watch: []Ref{hr, tcp, sec, etcd}, Log: p.log(),
		Judge: func(objs Objects) (bool, string, error) {
			if t := refused(objs.Get(hr), "HelmRelease "+hr.Name); t != nil {
				return false, "", t
			}
			if cm := objs.Get(etcd); cm != nil {
				msg, _, _ := unstructured.NestedString(cm.Object, "data", "message")
				return false, "", &Terminal{Class: verdict.Configuration, Detail: fmt.Sprintf("the platform rendered ConfigMap %s/%s (status %q) instead of the cluster: %s",
					cm.GetNamespace(), cm.GetName(), nestedString(cm, "data", "status"), strings.Join(strings.Fields(msg), " "))}
			}
			version := nestedString(objs.Get(tcp), "status", "kubernetesResources", "version", "status")
			s := objs.Get(sec)
			data := ""
			if s != nil {
				data = nestedString(s, "data", sk.Key)
			}
			switch {
			case version == "Ready" && data != "":
				return true, "TenantControlPlane Ready, admin kubeconfig written", nil
			case version == "Ready":
				return false, "TenantControlPlane Ready; Secret " + sk.Name + " has no key " + sk.Key + " yet", nil
			}
			written := "not written yet"
			if data != "" {
				written = "written"
			}
			return false, fmt.Sprintf("TenantControlPlane %s; Secret %s %s; HelmRelease %s", tcpDetail(objs.Get(tcp)), sk.Name, written,
				condDetail(objs.Get(hr))), nil
		}})
	if err != nil {
		return nil, err
	}
	tc, err := p.Mgmt.FromSecret(ctx, "tenant "+names.Release(), sk.Namespace, sk.Name, sk.Key)
	if err != nil {
		return nil, err
	}
	return tc, p.waitReadyz(ctx, what, tc, sk)
}

// readyzRetry is how soon /readyz is asked again while the tenant apiserver does not answer yet:
// an internal interval; the phase's context bounds the whole.
const readyzRetry = time.Second

// waitReadyz asks the tenant apiserver's /readyz until it answers, inside ctx.
func (p Platform) waitReadyz(ctx context.Context, what string, tc *cluster.Cluster, sk SecretKey) error {
	start := time.Now()
	var budget time.Duration
	if dl, ok := ctx.Deadline(); ok {
		budget = dl.Sub(start)
	}
	var last error
	for tries := 1; ; tries++ {
		_, last = tc.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if last == nil {
			return nil
		}
		if tries == 1 {
			fmt.Fprintf(p.log(), "%s %s: %s: /readyz does not answer yet (%v); asking again every %s\n",
				time.Now().UTC().Format("15:04:05.000"), phaseOf(ctx), what, last, readyzRetry)
		}
		t := time.NewTimer(readyzRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			class, detail := verdict.Deadline, fmt.Sprintf("the TenantControlPlane is Ready and the kubeconfig in %s written, but the apiserver never answered /readyz (%d tries): %v", sk, tries, last)
			if why := unanswered(ctx, tc); why != "" {
				// The substrate names what is missing: the address cannot answer, however long.
				class, detail = verdict.Install, detail+"; "+why
			}
			return &WaitError{Phase: phaseOf(ctx), What: what, Class: class, Elapsed: time.Since(start), Budget: budget, At: time.Now(), Detail: detail}
		case <-t.C:
		}
	}
}

// unansweredTimeout bounds the substrate's look at why a tenant address does not answer, asked
// after the wait's own context has ended.
const unansweredTimeout = 10 * time.Second

// unanswered asks the substrate why tc's address does not answer; empty when it cannot tell.
func unanswered(ctx context.Context, tc *cluster.Cluster) string {
	if tc.Unanswered == nil {
		return ""
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unansweredTimeout)
	defer cancel()
	return tc.Unanswered(actx)
}

func nestedString(u *unstructured.Unstructured, fields ...string) string {
	if u == nil {
		return ""
	}
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

func tcpDetail(obj *unstructured.Unstructured) string {
	if obj == nil {
		return "not created yet"
	}
	v, _, _ := unstructured.NestedString(obj.Object, "status", "kubernetesResources", "version", "status")
	return "version status " + orDash(v)
}
