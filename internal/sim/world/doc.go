// Package world is the sim substrate's management cluster: one etcd (shared with the tenant
// control planes under other prefixes), kube-apiserver, kube-controller-manager, kube-scheduler
// and kwok playing the kubelets of a few management Nodes with real allocatable cpu and memory,
// every CRD under fixtures/crds, and one controller-runtime manager running the real Cluster API
// controllers, their conversion and admission webhooks (TLS on loopback), and whatever stand-in
// reconcilers are added before Run.
//
// Container logs of pods on the management Nodes are files (ContainerLog) that kwok serves to
// `kubectl logs`, follow included.
package world
