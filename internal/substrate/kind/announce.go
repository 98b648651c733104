package kind

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// Unannounced says what keeps MetalLB from announcing the address of the tenant apiserver's
// LoadBalancer Service when the address was assigned and does not answer; empty when some node
// could announce it (the cause is then elsewhere). It reads the cluster as MetalLB v0.16.1's
// layer-2 speaker decides who announces (speaker/layer2_controller.go:253-278): a node with a
// speaker, without NodeNetworkUnavailable and without assumptions.ExcludeFromExternalLBLabel (the
// platform's chart leaves ignoreExcludeLB false).
func Unannounced(kube kubernetes.Interface) func(ctx context.Context, namespace, secretName string) string {
	return func(ctx context.Context, namespace, secretName string) string {
		svc := controlPlaneName(secretName) + "-e2e-lb"
		addr := "its address"
		if s, err := kube.CoreV1().Services(namespace).Get(ctx, svc, metav1.GetOptions{}); err == nil {
			for _, in := range s.Status.LoadBalancer.Ingress {
				addr = in.IP
			}
		}
		why, err := noAnnouncer(ctx, kube)
		if err != nil {
			return fmt.Sprintf("could not tell whether MetalLB announces %s: %v", addr, err)
		}
		if why == "" {
			return ""
		}
		return fmt.Sprintf("MetalLB assigned %s to Service %s/%s, but no node announces it: %s", addr, namespace, svc, why)
	}
}

// noAnnouncer names, node by node, why none may announce a layer-2 address; empty when one may.
func noAnnouncer(ctx context.Context, kube kubernetes.Interface) (string, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list Nodes: %w", err)
	}
	pods, err := kube.CoreV1().Pods(assumptions.MetalLBNamespace).List(ctx, metav1.ListOptions{LabelSelector: assumptions.MetalLBSpeakerSelector})
	if err != nil {
		return "", fmt.Errorf("list speaker pods in %s: %w", assumptions.MetalLBNamespace, err)
	}
	speaker := map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && podReady(&p) {
			speaker[p.Spec.NodeName] = true
		}
	}
	var reasons []string
	for _, n := range nodes.Items {
		switch {
		case !speaker[n.Name]:
			reasons = append(reasons, n.Name+": no Ready speaker pod")
		case hasLabel(&n, assumptions.ExcludeFromExternalLBLabel):
			reasons = append(reasons, fmt.Sprintf("%s: carries %s, and the platform's MetalLB chart leaves speaker.ignoreExcludeLB false (remove the label: kubectl label node %s %s-)",
				n.Name, assumptions.ExcludeFromExternalLBLabel, n.Name, assumptions.ExcludeFromExternalLBLabel))
		case networkUnavailable(&n):
			reasons = append(reasons, n.Name+": condition NetworkUnavailable=True")
		default:
			return "", nil
		}
	}
	sort.Strings(reasons)
	if len(speaker) == 0 {
		return fmt.Sprintf("no MetalLB speaker pod (%s in %s) is Ready on any node (%d pods found); %s",
			assumptions.MetalLBSpeakerSelector, assumptions.MetalLBNamespace, len(pods.Items), strings.Join(reasons, "; ")), nil
	}
	if len(nodes.Items) == 0 {
		return "the cluster has no Node", nil
	}
	return strings.Join(reasons, "; "), nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasLabel(n *corev1.Node, key string) bool {
	_, ok := n.Labels[key]
	return ok
}

func networkUnavailable(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeNetworkUnavailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
