// Package install brings the kind lane's components and the Cozystack platform onto a
// management cluster and proves them installed. What the harness itself applies (the storage
// classes, the platform operator, the platform Package, the MetalLB address pool, spec.etcd on
// the root tenant) goes in with server-side apply or a merge patch; what the platform installs
// from there is judged by gates: CRDs Established, Deployments Available, each provider's
// webhook Services selecting only its own pods (where it serves webhooks), the reported
// versions matching the lane's pins, and for the platform every Package Ready (an orphaned one
// is a configuration failure), every HelmRelease Ready on a fresh listing (remediations in
// their history reported or failed on, as the lane's policy says) and the root tenant's etcd.
// Every wait is watch-driven, bounded by its context (a lane phase), says what it waits for and
// how long it has left, and on running out says where it was stuck. What the harness assumes
// of upstream is in internal/install/assumptions, each fact with its source in docs/upstream.md.
package install
