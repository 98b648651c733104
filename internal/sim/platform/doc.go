// Package platform is the sim's stand-in for the Cozystack platform: it turns a Tenant app
// into its namespace (with the tenant admin group's RoleBinding, the cozystack-values Secret and
// the canary Secret) and a Kubernetes app that has a pool on a class other than talos into what
// packages/apps/kubernetes renders through its HelmRelease. That render is a model of
// cozystack/cozystack#4911 (NodeGroupClass, the Kairos pools), which no served Cozystack release
// carries; an app whose pools all run Talos is rendered by the real v1.6.1 chart through the
// real helm-controller instead (simenv.RendererLabel), and a test fails once the pinned chart
// knows NodeGroupClass. The model renders: Cluster,
// KamajiControlPlane, KubevirtCluster, and per pool a MachineDeployment, MachineHealthCheck,
// content-hashed KubevirtMachineTemplate and the bootstrap template of the pool's
// NodeGroupClass. For the Talos pools it plays the chart's talos-reconcile Job (the
// TalosConfigTemplate with the full worker configuration, once the Job's inputs exist), its
// bootstrap-token-tenant hook Job (the bootstrap token in the tenant) and cert-manager (the Talos
// CA); the Kairos pools' templates model cozystack/cozystack#4911, applied once the control
// plane is up. The chart's refusals leave the live objects unchanged
// and turn the HelmRelease Ready=False with the chart's message, mirrored in the app's status.
package platform
