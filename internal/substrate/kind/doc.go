// Package kind is the real lane's substrate: a kind management cluster made with the
// sigs.k8s.io/kind Go API (no kind binary) from a node config generated from the lane, with the
// components and the Cozystack platform installed and gated by internal/install. Its Preflight
// runs before anything slow and names every missing prerequisite of the machine: docker, a
// hardware KVM behind /dev/kvm, CPU, memory, disk and inotify limits.
package kind
