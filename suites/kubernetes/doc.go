// Package kubernetes is the conformance suite of tenant Kubernetes worker pools: one tenant
// cluster with the lane's pools (built-in talos and kairos, and an operator class when the lane
// declares one), brought up in parallel, one spec per pool checking that its workers joined
// (Node Ready, providerID kubevirt://<vmi>, Cluster API annotations, a pod on the Node), and
// the platform's refusals of invalid pools, checked cheaply on a second cluster at zero
// replicas. The orchestrator (cmd/e2e) runs it as a child process; see docs/architecture.md.
package kubernetes
