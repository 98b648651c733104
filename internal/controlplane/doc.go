// Package controlplane runs a real Kubernetes control plane as local processes from the
// binaries `make tools` builds: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
// and kwok. Every process listens on loopback on a free port, logs to a file, dies with the
// harness (parent-death signal) and is stopped by Stop, which is idempotent.
package controlplane
