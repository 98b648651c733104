// Package platform is the sim's stand-in for the Cozystack platform: it turns a Tenant app
// into its namespace (with the tenant admin group's RoleBinding and the canary Secret) and a
// Kubernetes app into what packages/apps/kubernetes renders through its HelmRelease: Cluster,
// KamajiControlPlane, KubevirtCluster, and per pool a MachineDeployment, MachineHealthCheck,
// content-hashed KubevirtMachineTemplate and, once the control plane is up, the bootstrap
// template of the pool's NodeGroupClass. The chart's refusals leave the live objects unchanged
// and turn the HelmRelease Ready=False with the chart's message, mirrored in the app's status.
package platform
