// Package bootdata reads a worker's bootstrap data (a Talos machine configuration or a Kairos
// #cloud-config) into what a guest learns from it. It imports nothing of the cluster's APIs, so
// both the host-side guest (internal/sim/guest) and the guest's own OS stand-in inside the VM
// (internal/sim/guestos) read the data with the same code; internal/sim/bootstrap renders it.
package bootdata
