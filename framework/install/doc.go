// Package install brings the kind lane's components and the Cozystack platform onto a
// management cluster and proves them installed. What the harness itself applies (the storage
// classes, the platform operator, the platform Package, the MetalLB address pool) goes in with
// server-side apply; what the platform installs from there is judged by gates: CRDs
// Established, Deployments Available, each provider's webhook Services selecting only its own
// pods, the reported versions matching the lane's pins, and for the platform every HelmRelease
// Ready on a fresh listing with no remediation in its history. Every wait is watch-driven,
// bounded by its context (a lane phase), says what it waits for and how long it has left, and
// on running out says where it was stuck.
package install
