package lane

import (
	"strings"
	"testing"
)

const kindGood = `name: x
substrate: kind
kubernetes: {version: v1.35, patch: v1.35.6}
pools:
  - {name: md0, class: talos, replicas: 2}
workload: {image: docker.io/library/nginx, digest: sha256:4a73073bd557c65b759505da037898b61f1be6cbcc3c2c3aeac22d2a470c1752}
components:
  - {name: kind-node, version: v1.35.4, image: docker.io/kindest/node, digest: unknown, note: not listed here}
suites: [{name: kubernetes}]
budget:
  jobCap: 10m
  margin: 1m
  diagnosticsReserve: 1m
  artifactReserve: 30s
  phases:
    - {name: cluster, ceiling: 1m}
platform:
  source: release:v1.6.2
  packages: [cozystack.external-dns]
  disabledPackages:
    - {name: cozystack.goldpinger, reason: not on the join path}
kind:
  networking: {disableDefaultCNI: true, kubeProxyMode: none, podSubnet: 100.65.0.0/16, serviceSubnet: 10.96.0.0/16}
  registryMirrors: {docker.io: ["http://mirror:5000"]}
  portMappings: [{containerPort: 30080, hostPort: 8080}]
  loadBalancerRange: 172.18.255.200-172.18.255.250
`

// A kind lane's own sections are checked field by field.
func TestKindLaneValidation(t *testing.T) {
	if _, err := Parse("lanes/x.yaml", []byte(kindGood)); err != nil {
		t.Fatalf("valid kind lane refused: %v", err)
	}
	cases := map[string][2]string{
		"no node image": {"  - {name: kind-node, version: v1.35.4, image: docker.io/kindest/node, digest: unknown, note: not listed here}\n", `components: a kind lane pins its node image as component "kind-node"`},
		"ipvs":          {"kubeProxyMode: none", `kind.networking.kubeProxyMode: "ipvs" is not iptables, nftables or none`},
		"bad cidr":      {"podSubnet: 100.65.0.0/16", `kind.networking.podSubnet: "10.244.0.0/33" is not a CIDR`},
		// kube-ovn's POD_CIDR is the platform's 10.244.0.0/16 unless the lane moves it.
		"pods overlap platform default":         {"podSubnet: 100.65.0.0/16", `kind.networking.podSubnet: 10.244.0.0/16 (the kind cluster's pod range, each Node's podCIDR, where Cilium takes its router and ingress addresses) overlaps platform.networking.podCIDR (unset: the platform's default) 10.244.0.0/16 (kube-ovn's POD_CIDR`},
		"pods overlap join":                     {"podSubnet: 100.65.0.0/16", `kind.networking.podSubnet: 100.64.0.0/15 (the kind cluster's pod range, each Node's podCIDR, where Cilium takes its router and ingress addresses) overlaps platform.networking.joinCIDR (unset: the platform's default) 100.64.0.0/16 (kube-ovn's JOIN_CIDR)`},
		"services overlap the lane's pod range": {"  packages: [cozystack.external-dns]\n", `kind.networking.serviceSubnet: 10.96.0.0/16 (the kind cluster's Service range) overlaps platform.networking.podCIDR 10.96.0.0/12 (kube-ovn's POD_CIDR`},
		"mirror scheme":                         {`"http://mirror:5000"`, `kind.registryMirrors.docker.io[0]: "mirror:5000" is not an http(s):// endpoint`},
		"port":                                  {"containerPort: 30080", "kind.portMappings[0].containerPort: 70000 is not a port"},
		"range":                                 {"loadBalancerRange: 172.18.255.200-172.18.255.250", `kind.loadBalancerRange: "172.18.255.250-172.18.255.200" ends before it starts`},
		"both lists":                            {"{name: cozystack.goldpinger,", `platform.disabledPackages[0]: "cozystack.external-dns" is also enabled at platform.packages[0]`},
		"no reason":                             {"{name: cozystack.goldpinger, reason: not on the join path}", `platform.disabledPackages[0].reason: is required`},
		"orphans":                               {"{name: cozystack.goldpinger,", `lanes/x.yaml:20: platform.disabledPackages: at main 3c780acd417f and v1.6.2: disabling cozystack.seaweedfs-application orphans cozystack.tenant-application (needs it, sources/tenant-application.yaml:18) → cozystack.cozystack-basics (needs cozystack.tenant-application, sources/cozystack-basics.yaml:15) → cozystack.kubevirt-cdi (needs cozystack.cozystack-basics, sources/kubevirt-cdi.yaml:23), which the lane's suites need`},
		"empty release":                         {"source: release:v1.6.2", `platform.source: release: names no release (release:v1.6.2)`},
		"bad scheme":                            {"source: release:v1.6.2", `platform.source: "relase:v1.6.2" is not a platform source`},
		"sim with kind":                         {"substrate: kind", `kind: is only for kind lanes`},
		"node too new": {"version: v1.35.4, image: docker.io/kindest/node, digest: unknown, note: not listed here",
			`components: component "kind-node": it runs Kubernetes v1.37.0, outside the management range: Cluster API v1.13 supports v1.32 to v1.36`},
		"node not a release": {"version: v1.35.4, image: docker.io/kindest/node, digest: unknown, note: not listed here",
			`components: component "kind-node": tag "v1.35" is not a Kubernetes release vX.Y.Z`},
	}
	repl := map[string]string{
		"no node image": "", "ipvs": "kubeProxyMode: ipvs", "bad cidr": "podSubnet: 10.244.0.0/33",
		"pods overlap platform default": "podSubnet: 10.244.0.0/16", "pods overlap join": "podSubnet: 100.64.0.0/15",
		"services overlap the lane's pod range": "  packages: [cozystack.external-dns]\n  networking: {podCIDR: 10.96.0.0/12}\n",
		"mirror scheme":                         `"mirror:5000"`, "port": "containerPort: 70000",
		"range": "loadBalancerRange: 172.18.255.250-172.18.255.200", "both lists": "{name: cozystack.external-dns,",
		"no reason": "{name: cozystack.goldpinger}", "orphans": "{name: cozystack.seaweedfs-application,",
		"empty release": "source: \"release:\"", "sim with kind": "substrate: sim",
		"bad scheme":         "source: relase:v1.6.2",
		"node too new":       "version: v1.37.0, image: docker.io/kindest/node, digest: sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5",
		"node not a release": "version: v1.35, image: docker.io/kindest/node, digest: sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f",
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			data := strings.Replace(kindGood, c[0], repl[name], 1)
			if data == kindGood {
				t.Fatalf("case changes nothing")
			}
			_, err := Parse("lanes/x.yaml", []byte(data))
			if err == nil || !strings.Contains(err.Error(), c[1]) {
				t.Fatalf("want %q, got %v", c[1], err)
			}
		})
	}
}

// A kind node image's tag is the Kubernetes release it runs, and the management cluster must run
// a release Cluster API v1.13 supports (v1.32 to v1.36): kind v0.33.0's own default (v1.37.0)
// is outside it, kind v0.31.0's (v1.35.0) inside.
func TestKindNodeVersionIsInTheManagementRange(t *testing.T) {
	for tag, want := range map[string]string{
		"v1.32.0": "", "v1.35.0": "", "v1.36.1": "",
		"v1.31.9": "outside the management range", "v1.37.0": "outside the management range",
		"v1.35": "is not a Kubernetes release", "latest": "is not a Kubernetes release", "v2.0.0": "is not a Kubernetes release",
	} {
		err := CheckKindNodeVersion(tag)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: want %q, got %v", tag, want, err)
		}
	}
}
