package install

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// CRDsEstablished waits until every named CRD exists and is Established.
func CRDsEstablished(ctx context.Context, dyn dynamic.Interface, names []string, o GateOptions) error {
	what := fmt.Sprintf("CRDs Established (%s)", strings.Join(names, ", "))
	return Wait(ctx, dyn, Watch{GVR: gvrCRD}, what, o.Log, func(objs []*unstructured.Unstructured) (bool, string, error) {
		byName := index(objs)
		var stuck []string
		for _, n := range names {
			u, ok := byName[n]
			if !ok {
				stuck = append(stuck, "CRD "+n+" not created yet")
				continue
			}
			if s, r, m, _ := condition(u, "Established"); s != "True" {
				stuck = append(stuck, fmt.Sprintf("CRD %s Established=%q (%s: %s)", n, s, r, m))
			}
		}
		return len(stuck) == 0, strings.Join(stuck, "; "), nil
	})
}

// DeploymentsAvailable waits until every named Deployment in ns reports Available=True for its
// current generation.
func DeploymentsAvailable(ctx context.Context, dyn dynamic.Interface, ns string, names []string, o GateOptions) error {
	what := fmt.Sprintf("Deployments Available in %s (%s)", ns, strings.Join(names, ", "))
	return Wait(ctx, dyn, Watch{GVR: gvrDeployment, Namespace: ns}, what, o.Log, func(objs []*unstructured.Unstructured) (bool, string, error) {
		byName := index(objs)
		var stuck []string
		for _, n := range names {
			u, ok := byName[n]
			if !ok {
				stuck = append(stuck, "deployment "+n+" not created yet")
				continue
			}
			observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			if observed < u.GetGeneration() {
				stuck = append(stuck, fmt.Sprintf("deployment %s: generation %d not observed yet (at %d)", n, u.GetGeneration(), observed))
				continue
			}
			s, r, m, _ := condition(u, "Available")
			if s != "True" {
				ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
				stuck = append(stuck, fmt.Sprintf("deployment %s: Available=%q (%s: %s), %d ready", n, s, r, m, ready))
			}
		}
		return len(stuck) == 0, strings.Join(stuck, "; "), nil
	})
}

// DeploymentRuns checks that Deployment ns/name's pod template has every named container.
func DeploymentRuns(ctx context.Context, dyn dynamic.Interface, ns, name string, containers []string) error {
	d, err := dyn.Resource(gvrDeployment).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("deployment %s/%s: %w", ns, name, err)
	}
	list, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	have := map[string]bool{}
	var names []string
	for _, c := range list {
		if n, _ := c.(map[string]any)["name"].(string); n != "" {
			have[n] = true
			names = append(names, n)
		}
	}
	var missing []string
	for _, c := range containers {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("deployment %s/%s runs no container %s (it runs %s)", ns, name, strings.Join(missing, ", "), strings.Join(names, ", "))
	}
	return nil
}

// WebhookSelectors checks, in a namespace that several providers share, that every Service a
// webhook configuration calls selects the pods of exactly one Deployment, and that each named
// Deployment is served by at least one such Service. A Service whose selector also matches
// another provider's pods (kairos-io/kairos#5815) is named with every Deployment it reaches.
func WebhookSelectors(ctx context.Context, dyn dynamic.Interface, ns string, deployments []string) error {
	services, err := webhookServices(ctx, dyn, ns)
	if err != nil {
		return err
	}
	owner, err := podOwners(ctx, dyn, ns)
	if err != nil {
		return err
	}
	served := map[string][]string{}
	var problems []string
	for _, svcName := range sortedSet(services) {
		svc, err := dyn.Resource(gvrService).Namespace(ns).Get(ctx, svcName, metav1.GetOptions{})
		if err != nil {
			problems = append(problems, fmt.Sprintf("webhook Service %s/%s (named by %s): %v", ns, svcName, strings.Join(services[svcName], ", "), err))
			continue
		}
		sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		if len(sel) == 0 {
			problems = append(problems, fmt.Sprintf("webhook Service %s/%s has no selector", ns, svcName))
			continue
		}
		pods, err := dyn.Resource(gvrPod).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
		if err != nil {
			return fmt.Errorf("webhook Service %s/%s: list its pods: %w", ns, svcName, err)
		}
		deps := map[string]bool{}
		for _, p := range pods.Items {
			deps[owner[p.GetName()]] = true
		}
		names := sortedKeys(deps)
		switch {
		case len(names) > 1:
			problems = append(problems, fmt.Sprintf("webhook Service %s/%s selector %s selects the pods of %d Deployments (%s): admission calls land on other providers' pods; its selector must carry the provider's own label",
				ns, svcName, labels.SelectorFromSet(sel), len(names), strings.Join(names, ", ")))
		case len(names) == 1:
			served[names[0]] = append(served[names[0]], svcName)
		}
	}
	for _, d := range deployments {
		if len(served[d]) == 0 {
			problems = append(problems, fmt.Sprintf("no webhook Service in %s selects only the pods of Deployment %s", ns, d))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("webhook selectors: %s", strings.Join(problems, "; "))
	}
	return nil
}

// webhookServices maps each Service in ns that a webhook configuration calls to the
// configurations that call it.
func webhookServices(ctx context.Context, dyn dynamic.Interface, ns string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, gvr := range []schema.GroupVersionResource{gvrVWebhook, gvrMWebhook} {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		for _, cfg := range list.Items {
			hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
			for _, h := range hooks {
				m, _ := h.(map[string]any)
				svcNS, _, _ := unstructured.NestedString(m, "clientConfig", "service", "namespace")
				svcName, _, _ := unstructured.NestedString(m, "clientConfig", "service", "name")
				if svcNS == ns && svcName != "" {
					out[svcName] = appendOnce(out[svcName], cfg.GetKind()+" "+cfg.GetName())
				}
			}
		}
	}
	return out, nil
}

// podOwners maps each pod in ns to the Deployment that owns it through its ReplicaSet, or to
// "pod <name>" when no Deployment does.
func podOwners(ctx context.Context, dyn dynamic.Interface, ns string) (map[string]string, error) {
	rsList, err := dyn.Resource(gvrReplicaSet).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list replicasets in %s: %w", ns, err)
	}
	rsOwner := map[string]string{}
	for _, rs := range rsList.Items {
		for _, ref := range rs.GetOwnerReferences() {
			if ref.Kind == "Deployment" {
				rsOwner[rs.GetName()] = ref.Name
			}
		}
	}
	pods, err := dyn.Resource(gvrPod).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods in %s: %w", ns, err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.GetName()] = "pod " + p.GetName()
		for _, ref := range p.GetOwnerReferences() {
			if d, ok := rsOwner[ref.Name]; ok && ref.Kind == "ReplicaSet" {
				out[p.GetName()] = d
			}
		}
	}
	return out, nil
}

var versionLike = regexp.MustCompile(`^v?\d+\.\d+`)

// VersionResult is what a version check found.
type VersionResult struct {
	Checked bool   // false: the pin names no version or digest to compare (recorded, not gated)
	Have    string // what the cluster reports
	Note    string
}

// versionMatches says whether a reported version is the pin: equal, or the pin followed by the
// platform's flavour suffix ("v1.13.7-core", "v0.6.13-bootstrap-talos").
func versionMatches(have, pin string) bool {
	return have == pin || strings.HasPrefix(have, pin+"-")
}

// imageMatches compares a running image reference with a pin: the digest when the lane pins
// one, else the tag.
func imageMatches(image, version, digest string) (bool, string) {
	if strings.HasPrefix(digest, "sha256:") {
		return strings.HasSuffix(image, "@"+digest), "digest " + digest
	}
	ref, _, _ := strings.Cut(image, "@")
	tag := ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	return versionMatches(tag, version), "tag " + version
}

func index(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := make(map[string]*unstructured.Unstructured, len(objs))
	for _, o := range objs {
		m[o.GetName()] = o
	}
	return m
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

func sortedSet[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedKeys(m map[string]bool) []string { return sortedSet(m) }
