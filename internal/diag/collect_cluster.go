package diag

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// tenantJoin writes what a joining worker meets in tenant cluster tc: every CSR with who asked,
// for what and how it was answered (without the request and certificate bytes), and Kamaji's
// kubelet configuration, whose clusterDNS a kubeadm join reads. A nil tc notes that no tenant
// cluster is there to read.
func (s *scene) tenantJoin(tc *reader) collector {
	name := Tenant
	if tc != nil {
		name = tc.name
	}
	dir := "clusters/" + name + "/"
	return collector{name: "tenant-join", scope: "cluster " + name, share: 0.06, bytes: 1 << 20, key: "tenant-join " + name,
		run: func(ctx context.Context, w *work) error {
			if tc == nil {
				w.note("no tenant cluster: CSRs and kubelet-config cannot be read")
				return nil
			}
			list, err := tc.c.Kube.CertificatesV1().CertificateSigningRequests().List(ctx, listOptions(""))
			if err != nil {
				return fmt.Errorf("listing CSRs of the tenant cluster: %w", err)
			}
			w.items = len(list.Items)
			lines := []string{fmt.Sprintf("%d CertificateSigningRequest(s) in the tenant cluster", len(list.Items))}
			sort.Slice(list.Items, func(i, j int) bool {
				return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp)
			})
			for _, c := range list.Items {
				lines = append(lines, fmt.Sprintf("%s %s: signer %s, user %s, usages %v: %s", stamp(c.CreationTimestamp.Time), c.Name,
					c.Spec.SignerName, c.Spec.Username, c.Spec.Usages, csrState(&c)))
			}
			if err := w.file(dir+"csrs.txt", []byte(strings.Join(lines, "\n")+"\n"), 512<<10); err != nil {
				return err
			}
			cm, err := tc.c.Kube.CoreV1().ConfigMaps(tenant.KubeletConfigNamespace).Get(ctx, tenant.KubeletConfigName, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				w.note("the tenant has no ConfigMap %s/%s", tenant.KubeletConfigNamespace, tenant.KubeletConfigName)
				return w.file(dir+"kubelet-config.yaml", []byte(fmt.Sprintf("# ConfigMap %s/%s does not exist in the tenant cluster\n",
					tenant.KubeletConfigNamespace, tenant.KubeletConfigName)), 0)
			case err != nil:
				return fmt.Errorf("reading the tenant's %s/%s: %w", tenant.KubeletConfigNamespace, tenant.KubeletConfigName, err)
			}
			cm.ManagedFields = nil
			cm.Kind, cm.APIVersion = "ConfigMap", "v1"
			head := "# clusterDNS: " + clusterDNSOf(cm.Data[tenant.KubeletConfigKey]) + "\n"
			svc, serr := tc.c.Kube.CoreV1().Services(tenant.CoreDNSNamespace).Get(ctx, tenant.CoreDNSService, metav1.GetOptions{})
			switch {
			case serr != nil:
				head += fmt.Sprintf("# tenant CoreDNS Service %s/%s: not read (%v)\n", tenant.CoreDNSNamespace, tenant.CoreDNSService, serr)
			case !strings.Contains(cm.Data[tenant.KubeletConfigKey], svc.Spec.ClusterIP):
				head += fmt.Sprintf("# clusterDNS is not the tenant CoreDNS Service's address: %s/%s is at %s\n", svc.Namespace, svc.Name, svc.Spec.ClusterIP)
			default:
				head += fmt.Sprintf("# tenant CoreDNS Service %s/%s is at %s\n", svc.Namespace, svc.Name, svc.Spec.ClusterIP)
			}
			return w.yamlWithHead(dir+"kubelet-config.yaml", head, cm, 256<<10)
		}}
}

func csrState(c *certv1.CertificateSigningRequest) string {
	var parts []string
	for _, cond := range c.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s (%s: %s)", cond.Type, cond.Reason, cond.Message))
	}
	if len(parts) == 0 {
		parts = append(parts, "pending")
	}
	if len(c.Status.Certificate) > 0 {
		parts = append(parts, "certificate issued")
	}
	return strings.Join(parts, ", ")
}

// clusterDNSOf reads the clusterDNS list out of a KubeletConfiguration, in words.
func clusterDNSOf(cfg string) string {
	for _, line := range strings.Split(cfg, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "clusterDNS:") {
			v := strings.TrimSpace(strings.TrimPrefix(t, "clusterDNS:"))
			if v == "" || v == "[]" || v == "null" {
				return "EMPTY (kubeadm-joined workers get no cluster DNS)"
			}
			return v
		}
	}
	if strings.Contains(cfg, "clusterDNS") {
		return "present (list form)"
	}
	return "ABSENT (kubeadm-joined workers get no cluster DNS)"
}

func (w *work) yamlWithHead(rel, head string, v any, limit int64) error {
	data, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return w.file(rel, append([]byte(head), data...), limit)
}

// previousLogs reads the previous log of every container that restarted, in the tenant
// namespace of the management cluster and in every namespace of the tenant cluster.
func (s *scene) previousLogs() collector {
	return collector{name: "previous-logs", scope: "clusters", share: 0.14, bytes: 4 << 20, count: 24, key: "previous-logs",
		run: func(ctx context.Context, w *work) error {
			count := 0
			var errs []error
			for _, r := range append([]*reader{s.mgmt}, s.tenants...) {
				ns := s.namespace
				if r != s.mgmt {
					ns = ""
				}
				pods, err := r.pods(ctx, ns)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				for i := range pods {
					p := &pods[i]
					for _, cs := range append(append(p.Status.InitContainerStatuses[:0:0], p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
						if cs.RestartCount == 0 {
							continue
						}
						if count >= w.limits.Logs {
							w.truncated = append(w.truncated, fmt.Sprintf("more than %d restarted containers; the rest were not read", w.limits.Logs))
							return errors.Join(errs...)
						}
						count++
						rel := fmt.Sprintf("clusters/%s/logs/%s/%s/%s.previous.log", r.name, p.Namespace, p.Name, cs.Name)
						n, cut, err := r.readLog(ctx, w.a, rel, p.Namespace, p.Name, cs.Name, true, w.limits.LogBytes)
						if err != nil {
							w.note("%v", err)
							continue
						}
						w.items++
						w.record(rel, n, cut)
					}
				}
			}
			if count == 0 {
				w.note("no container restarted")
			}
			return errors.Join(errs...)
		}}
}

// skipKinds are not dumped: Secrets never, and kinds that are streamed or carry no state.
var skipKinds = map[string]bool{
	"Secret": true, "Event": true, "Lease": true, "TokenReview": true, "SubjectAccessReview": true,
	"SelfSubjectAccessReview": true, "SelfSubjectRulesReview": true, "LocalSubjectAccessReview": true,
	"SelfSubjectReview": true, "Binding": true, "ComponentStatus": true,
}

// resources dumps every listable kind of one cluster (the namespace given, or every namespace
// and the cluster-scoped kinds), a file per kind and namespace, within the dump bounds.
func (s *scene) resources(r *reader, namespace string) collector {
	name := "resources"
	scope := "cluster " + r.name
	return collector{name: name, scope: scope, share: 0.2, bytes: 0, count: 0, key: "resources " + r.name,
		run: func(ctx context.Context, w *work) error {
			lists, err := r.c.Kube.Discovery().ServerPreferredResources()
			if err != nil && len(lists) == 0 {
				return fmt.Errorf("discovery of cluster %s: %w", r.name, err)
			}
			if err != nil {
				w.note("discovery of cluster %s was partial: %v", r.name, err)
			}
			var kinds []schema.GroupVersionKind
			for _, l := range lists {
				gv, perr := schema.ParseGroupVersion(l.GroupVersion)
				if perr != nil {
					continue
				}
				for _, res := range l.APIResources {
					if strings.Contains(res.Name, "/") || skipKinds[res.Kind] || !hasVerb(res.Verbs, "list") {
						continue
					}
					if isSecret(schema.GroupKind{Group: gv.Group, Kind: res.Kind}) {
						continue
					}
					if namespace != "" && !res.Namespaced && res.Kind != "Node" && gv.Group != "cozystack.io" {
						continue // cluster-scoped kinds of the management cluster: only Nodes and classes
					}
					kinds = append(kinds, gv.WithKind(res.Kind))
				}
			}
			var objects int
			var total int64
			for _, l := range r.listMany(ctx, kinds, namespace) {
				if err := ctx.Err(); err != nil {
					return err
				}
				gvk, list := l.gvk, l.items
				if l.err != nil {
					w.note("%v", l.err)
					continue
				}
				byNS := map[string][]map[string]any{}
				for i := range list {
					if objects >= s.dumpObjects(w) {
						w.truncated = append(w.truncated, fmt.Sprintf("more than %d objects; the rest were not dumped", s.dumpObjects(w)))
						return nil
					}
					objects++
					byNS[list[i].GetNamespace()] = append(byNS[list[i].GetNamespace()], clean(&list[i]))
				}
				nss := make([]string, 0, len(byNS))
				for ns := range byNS {
					nss = append(nss, ns)
				}
				sort.Strings(nss)
				for _, ns := range nss {
					dir := "_cluster"
					if ns != "" {
						dir = ns
					}
					rel := fmt.Sprintf("clusters/%s/resources/%s/%s.yaml", r.name, dir, kindFile(gvk))
					before := w.bytes
					if err := w.yaml(rel, byNS[ns], w.limits.DumpBytes-total); err != nil {
						return err
					}
					total += w.bytes - before
					w.items += len(byNS[ns])
					if total >= w.limits.DumpBytes {
						w.truncated = append(w.truncated, fmt.Sprintf("dump reached its bound of %d bytes", w.limits.DumpBytes))
						return nil
					}
				}
			}
			return nil
		}}
}

func (s *scene) dumpObjects(w *work) int { return w.limits.DumpObjects }

func hasVerb(verbs []string, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}
