// Package realupstream runs the real upstream controllers the sim can build, as local processes
// against a given kube-apiserver (the sim's management apiserver), and hands them what they need:
// their CRDs from their own modules, their webhooks on loopback with a self-signed certificate,
// and, for helm-controller, charts served over local HTTP as ExternalArtifacts.
//
// `make tools` (hack/tools/build.sh) builds each from its own tools module at an exact tag and
// keeps the files the sim needs from the modules under src/<module>@<version>/ of the tools
// folder; versions.env there names every module, version and sum, and Find reads it (a run can
// list Build.Components). fixtures/upstream/README.md says where every CRD comes from.
//
// # What each needs
//
//   - CAPK (sigs.k8s.io/cluster-api-provider-kubevirt v0.1.10, capk-manager): its four CRDs with
//     the Cluster API contract labels of its kustomization; its validating webhook for
//     KubevirtMachineTemplate (always served: a cert in --webhook-cert-dir); Cluster API's CRDs
//     serving v1beta1 through Cluster API's conversion webhook (it is built against Cluster API
//     v1.10); KubeVirt's VirtualMachine CRD (it creates the VMs); and, for a Machine, the bootstrap
//     data Secret the Machine names. It ignores a KubevirtCluster annotated
//     cluster.x-k8s.io/managed-by (Cozystack's, managed by Kamaji): the Kamaji control plane
//     provider, a stand-in in the sim, must set that one's controlPlaneEndpoint and status.ready.
//   - CABPT (github.com/siderolabs/cluster-api-bootstrap-provider-talos v0.6.12, cabpt-manager):
//     TalosConfig and TalosConfigTemplate at v1alpha2 and v1alpha3 converting through its own
//     /convert, its validating webhooks, Cluster API's CRDs at v1beta1 (MachinePool included: it
//     watches it), and a Cluster whose infrastructure is ready with a control plane endpoint.
//   - helm-controller (github.com/fluxcd/helm-controller v1.6.2): HelmRelease, and the source
//     kinds it watches from source-controller v1.9.0 (HelmChart, OCIRepository, ExternalArtifact);
//     KUBECONFIG in its environment (it has no --kubeconfig flag); the ExternalArtifact feature
//     gate; a label selector that takes the tenant releases (sharding.fluxcd.io/key). A chart is
//     a ChartServer archive published with PublishExternalArtifact.
//   - KubeVirt's virt-controller (kubevirt.io/kubevirt v1.8.4, virt-controller): KubeVirt's CRDs
//     and its arguments as virt-operator computes them for the platform's KubeVirt CR
//     (KubeVirtInstall runs install-strategy, built by hack/tools/virt-controller, on the CR
//     KubeVirtCR renders from Cozystack v1.6.1's kubevirt package), the CR itself in namespace
//     kubevirt marked Deployed, the CDI kinds it informs on once DataVolumes are served
//     (VirtControllerCDICRDs), a serving certificate for its one HTTPS port; it is ready when
//     /leader says it leads. virt-handler's part (the Nodes' heartbeat, label and device
//     plugins; a started or crashed domain) is the stand-in internal/sim/kubevirt.
//   - The Cozystack v1.6.1 Kubernetes chart (src/github.com/cozystack/cozystack@v1.6.1, packed from
//     Build.ChartDir): ChartCRDs and Cluster API's and CAPK's CRDs; the platform's values in a
//     cozystack-values Secret; and the VirtualMachineClusterInstancetype CRD even for a node group
//     sized by resources, because talos-reconcile-job.yaml looks the instance type up for every
//     node group and Helm's lookup fails on a kind the apiserver does not serve.
//
// # Measured (2 cores shared with three other engineers' builds and tests, load 6-15)
//
// Cold builds, each with its own empty GOCACHE and a warm module cache (wall, CPU user+sys, peak
// RSS of the build, binary): capk-manager 5 min 12 s, 181+46 s, 0.89 GB, 56 MB; cabpt-manager
// 5 min 21 s, 217+50 s, 1.08 GB, 64 MB; helm-controller 8 min 12 s (71 % CPU), 286+65 s, 1.23 GB,
// 78 MB. About 14 min of CPU together, so about 7 min more for a cold `make tools` on two idle
// cores, less where CAPK and CABPT share Kubernetes v0.32 and controller-runtime v0.20 packages.
// Through build.sh itself into a fresh folder with the machine's shared GOCACHE, capk-manager took
// 10 min at load 15-19 (159+40 s CPU) and came out byte-identical. A relink from a warm GOCACHE
// (a fresh tools folder): 5.4 s for cabpt-manager, byte-identical.
// virt-controller: 6 min 10 s wall at load 7-11 with other engineers' builds (200+47 s CPU, peak
// RSS of the build 1.05 GB, binary 66 MB); through build.sh into a fresh tools folder at load
// 17-20, 7 min 41 s. install-strategy relinks from the same packages in 2-10 s.
// A warm `make tools` checks all eleven binaries and the kept files in 0.3 s (`go version -m` reads
// a binary's build information in about 20 ms).
//
// At run time, against the sim's management world (which itself starts in 11-18 s): ready (the
// readiness endpoint answers and the webhook completes a TLS handshake) 0.1-0.35 s after start
// for capk-manager, 0.25-0.75 s for cabpt-manager, 0.1-0.2 s for helm-controller. First work: CAPK
// makes its KubevirtCluster ready 1.9-2.3 s after it is created, and a VirtualMachine 2.2-2.3 s
// after its Machine; CABPT's bootstrap data reaches the Machine 3.1-4.2 s after the Machine is
// created;
// helm-controller installs a one-ConfigMap chart in 1.2-1.3 s and the Cozystack chart in 13-18 s
// (about 4 s until its resources are applied, then the two post-install hook Jobs,
// bootstrap-token-tenant and oidc-bootstrap, which Helm waits for one after the other, polling).
// virt-controller leads 0.6-1.1 s after start (its informers sync and it takes the lease
// kubevirt/virt-controller), with 77-83 MiB resident; install-strategy prints the install
// strategy in 0.5-1.1 s, and KubeVirt's 19 CRDs and CDI's 4 take the apiserver 3.8-9.3 s to
// establish (at load 8-11; the largest, VirtualMachinePool, VirtualMachineSnapshotContent and
// VirtualMachineInstance, 0.8-1.2 s each), beside the fixture CRDs: with all of them waited for,
// the sim's CRDs took 20.7 s at load 14-33 against 5.9 s before, so the sim substrate installs
// the 15 nothing makes once the world runs (2.8 s then, off the bring-up's path). The green sim
// lane then took 1m16s and 1m38s to its verdict against 1m10s and 1m45s without virt-controller,
// run alternately at the same loads (9-14, 12-20), within the noise of this machine. A VirtualMachine's VMI and
// launcher exist 0.3-0.6 s after it is created (TestVirtController), and a VMI whose domain
// crashed before it ran is replaced after KubeVirt's first start-failure backoff (10 s there).
// Resident memory: capk-manager
// 42 MiB at start, 51 MiB after its work; cabpt-manager 51 then 58 MiB; helm-controller 57 MiB,
// 99 MiB after installing the Cozystack chart.
//
// # What did not work, and why
//
//   - helm-controller refuses --kubeconfig (its flag set is its own); it is started through
//     env(1) with KUBECONFIG (and HOME) set, since a controlplane.Process takes no environment.
//   - With Cozystack's own helm-controller selector (!sharding.fluxcd.io/key) it ignores every
//     tenant release: those are run by shards. The sim's helm-controller takes the sharded ones.
//   - The chart does not install without the VirtualMachineClusterInstancetype CRD, which no
//     module ships as YAML (virt-operator builds it); InstancetypeCRD builds it from KubeVirt
//     v1.8.4's source. The earlier offline render (helm template, 58 objects) never noticed:
//     offline, lookup answers empty. Installed, the release's inventory lists 49 objects; it
//     leaves out the hooks Helm tracks apart (the post-install Jobs bootstrap-token-tenant and
//     oidc-bootstrap with their ServiceAccount, delete.yaml's pre-delete objects), which the
//     offline count of 58 included.
//   - helm-controller sets Ready=True InstallSucceeded before it writes the release's history
//     and inventory; a wait must also see the history (and status.observedGeneration).
//   - On the sim's kwok Nodes every Job's pod ends Succeeded at once without running: the chart's
//     talos-reconcile, bootstrap-token-tenant and oidc-bootstrap Jobs "succeed" and do nothing,
//     so no TalosConfigTemplate exists after an install.
//   - The webhook servers of CAPK and CABPT bind every interface: neither main.go sets a host
//     and neither has a flag for it. They only answer TLS with the sim's own certificate.
//   - The controllers run as the management apiserver's admin; their RBAC (config/rbac) is not
//     exercised.
//
// # In the sim
//
// The sim substrate (internal/substrate/simulated) runs CAPK, CABPT and helm-controller on every run:
// their CRDs, and the chart's (the real HelmRelease and KamajiControlPlane among them), replace
// the fixtures' copies and install beside the fixture CRDs before the world's manager starts
// (CRDsInstalled), with the platform's instance types (InstanceTypes); the processes start once
// Cluster API's webhooks answer (Options.Webhook carries CABPT's identity, which its CRDs name for
// conversion) and stop with the world. The chart is packed, served and published as the
// ExternalArtifact a Kubernetes app's release names; helm-controller takes only the releases the
// app API stand-in marks for the chart (Talos-only apps). The Kamaji stand-in plays the Kamaji
// control plane provider's part for the KubevirtCluster (endpoint and status.ready), and writes
// <cluster>-kubeconfig, through which CAPK patches the providerID onto the tenant Node. kwok no
// longer completes Job pods: internal/sim/hostjobs runs the chart's Jobs on the host, and
// internal/sim/certmanager issues the chart's Certificates. The chart's Jobs then need the
// Keycloak client kinds (the oidc-bootstrap hook deletes them by kind in every mode).
package realupstream
