// Package guestos is the operating system stand-in that runs inside a real worker VM (the
// worker disk of internal/sim/node, booted by QEMU on the sim's real Node). Talos cannot be had
// here, so this program does what a Talos worker does between reading its machine configuration
// and its kubelet's first start, as Talos v1.13.6 does it (each step cites the Talos source it
// imitates): it reads the bootstrap data from the config drive with the same reader the
// host-side guest uses (internal/sim/bootdata), writes the kubelet's bootstrap kubeconfig, its
// KubeletConfiguration, /etc/hosts and the resolver, starts containerd and runs the real kubelet
// as Talos' kubelet service, restarting it forever and saying so on the serial console in
// Talos' words. The join (TLS bootstrap, the CSR, the Node's registration) is the kubelet's own.
//
// Machine and Files are pure and tested on the host; Run is the program the worker disk's init
// hands over to (hack/guestosd).
package guestos
