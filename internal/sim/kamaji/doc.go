// Package kamaji is the sim's stand-in for Kamaji and its Cluster API control plane provider:
// a KamajiControlPlane becomes a TenantControlPlane and a real tenant control plane
// (kube-apiserver on the management etcd under a prefix of its own, kube-controller-manager,
// kube-scheduler and kwok for the Nodes the guest stand-in registers), with the kubeconfig
// Secrets, statuses, kubelet-config ConfigMap and CoreDNS Service the real ones publish.
package kamaji
