package lane

import (
	"strings"
	"testing"
)

// withClusters is the good lane with its pools and clusters replaced.
func withClusters(t *testing.T, pools, clusters string) string {
	t.Helper()
	data := strings.Replace(good, "pools:\n  - {name: md0, class: talos, replicas: 2}\n", pools+clusters, 1)
	if data == good {
		t.Fatal("the good lane has no pools to replace; update the test")
	}
	return data
}

// A clusters[] entry with versions is one cluster per version the chart offers, and each of its
// pools one pool per cluster, each named by its version; the release of each is the chart's.
func TestClustersAtVersionsAreExpanded(t *testing.T) {
	data := withClusters(t, "pools:\n  - {name: md0, cluster: join, class: talos, replicas: 2}\n  - {name: kairos, cluster: join, class: kairos, replicas: 1}\n  - {name: solo, cluster: one, class: talos, replicas: 1}\n",
		"clusters:\n  - {name: join, versions: {newest: 2}}\n  - {name: one, kubernetes: {version: v1.33}}\n")
	l, err := Parse("lanes/x.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range l.ConformanceClusters() {
		got = append(got, c.Name+"@"+c.Kubernetes.Version+"/"+c.Kubernetes.Patch)
	}
	if want := "join-v1-35@v1.35/v1.35.6 join-v1-34@v1.34/v1.34.9 one@v1.33/v1.33.13"; strings.Join(got, " ") != want {
		t.Errorf("clusters %v, want %s", got, want)
	}
	var pools []string
	for _, p := range l.Pools {
		pools = append(pools, p.Name+"/"+p.ClusterName()+"/"+l.Release(p).Patch)
	}
	if want := "md0-v1-35/join-v1-35/v1.35.6 md0-v1-34/join-v1-34/v1.34.9 kairos-v1-35/join-v1-35/v1.35.6 kairos-v1-34/join-v1-34/v1.34.9 solo/one/v1.33.13"; strings.Join(pools, " ") != want {
		t.Errorf("pools %v, want %s", pools, want)
	}
	// Every version offered, and a list in the lane's order.
	for sel, want := range map[string]int{"offered": 5, "[v1.32, v1.35]": 2} {
		l, err := Parse("lanes/x.yaml", []byte(strings.Replace(data, "{newest: 2}", sel, 1)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		if n := len(l.Clusters()); n != want+1 {
			t.Errorf("versions %s: %d clusters %v, want %d", sel, n, l.Clusters(), want+1)
		}
	}
	if l, _ := Parse("lanes/x.yaml", []byte(strings.Replace(data, "{newest: 2}", "[v1.32, v1.35]", 1))); l != nil && l.Clusters()[0] != "join-v1-32" {
		t.Errorf("a list keeps its order: %v", l.Clusters())
	}
}

// A version the chart does not offer at the pinned revision is refused, naming the revision,
// the offer and the schema line; so is a patch the chart does not render, and every misuse of
// clusters[].
func TestClustersRefuseWhatTheChartDoesNotOffer(t *testing.T) {
	pools := "pools:\n  - {name: md0, cluster: join, class: talos, replicas: 2}\n"
	offer := "cozystack v1.6.1 offers v1.35, v1.34, v1.33, v1.32, v1.31 (packages/apps/kubernetes/values.schema.json:172-183)"
	cases := map[string]string{
		"clusters:\n  - {name: join, kubernetes: {version: v1.36}}\n":                    "clusters[0].kubernetes.version: v1.36 is not a version the platform's Kubernetes chart offers at the pinned revision: " + offer,
		"clusters:\n  - {name: join, kubernetes: {version: v1.34, patch: v1.34.4}}\n":    "clusters[0].kubernetes.patch: v1.34.4: the chart renders v1.34.9 for v1.34 at cozystack v1.6.1 (packages/apps/kubernetes/files/versions.yaml:1-5)",
		"clusters:\n  - {name: join, kubernetes: {version: v1.34, patch: v1.35.6}}\n":    "clusters[0].kubernetes.patch: v1.35.6 is not a release of v1.34",
		"clusters:\n  - {name: join, versions: [v1.35, v1.30]}\n":                        `clusters[0].versions: "v1.30" is not a version the chart offers: ` + offer,
		"clusters:\n  - {name: join, versions: [v1.35, v1.35]}\n":                        `clusters[0].versions: "v1.35" is listed twice`,
		"clusters:\n  - {name: join, versions: {newest: 6}}\n":                           "clusters[0].versions: newest 6: " + offer + ", 5 versions",
		"clusters:\n  - {name: join, versions: {newest: 0}}\n":                           "clusters[0].versions: selects no version",
		"clusters:\n  - {name: join, versions: all}\n":                                   `clusters[0].versions: "all": want offered, {newest: N} or a list`,
		"clusters:\n  - {name: join, versions: {oldest: 2}}\n":                           "clusters[0].versions: a mapping may only say newest",
		"clusters:\n  - {name: join, versions: offered, kubernetes: {version: v1.35}}\n": "clusters[0].versions: is given with kubernetes",
		"clusters:\n  - {name: join}\n  - {name: other}\n":                               `clusters[1].name: cluster "other": no pool names it`,
		"clusters:\n  - {name: join}\n  - {name: join}\n":                                `clusters[1].name: "join" is declared twice`,
		"clusters:\n  - {name: refusals}\n":                                              `clusters[0].name: "refusals" is the kubernetes suite's cluster of refused pools`,
		"clusters:\n  - {name: join, versions: offered}\n":                               "",
	}
	for clusters, want := range cases {
		_, err := Parse("lanes/x.yaml", []byte(withClusters(t, pools, clusters)))
		switch {
		case want == "" && err != nil:
			t.Errorf("%q refused: %v", clusters, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: want %q, got %v", clusters, want, err)
		}
	}
	// The lane's own release is held to the same offer.
	_, err := Parse("lanes/x.yaml", []byte(strings.Replace(good, "{version: v1.35, patch: v1.35.6}", "{version: v1.30, patch: v1.30.2}", 1)))
	if err == nil || !strings.Contains(err.Error(), "lanes/x.yaml:3: kubernetes.version: v1.30 is not a version the platform's Kubernetes chart offers") {
		t.Errorf("lane release v1.30: %v", err)
	}
}

// Expanded names must still fit a label value; the error points at the entry they came from.
func TestExpandedNamesAreHeldToTheLabelLength(t *testing.T) {
	data := withClusters(t, "pools:\n  - {name: md0-long, cluster: join-cluster, class: talos, replicas: 1}\n",
		"clusters:\n  - {name: join-cluster, versions: [v1.35]}\n")
	_, err := Parse("lanes/x.yaml", []byte(data))
	if err == nil || !strings.Contains(err.Error(), `lanes/x.yaml:5: pools[0].cluster: pool "md0-long-v1-35" in cluster "join-cluster-v1-35"`) {
		t.Fatalf("want the expanded names refused at their entry, got %v", err)
	}
}

// A pool on an operator class with its own image runs the class's release: its cluster must be
// at the class's minor.
func TestAClassWithAnImageNeedsAClusterOfItsMinor(t *testing.T) {
	class := "classes:\n  - {name: acme, os: kairos, image: registry.example.invalid/a@sha256:0000000000000000000000000000000000000000000000000000000000000001, kubernetesVersion: v1.35.4}\n"
	data := withClusters(t, class+"pools:\n  - {name: acme, cluster: old, class: acme, replicas: 1}\n", "clusters:\n  - {name: old, kubernetes: {version: v1.34}}\n")
	_, err := Parse("lanes/x.yaml", []byte(data))
	if err == nil || !strings.Contains(err.Error(), "pools[0].class: class acme is built for Kubernetes v1.35.4, but pool acme is in cluster old at v1.34") {
		t.Fatalf("got %v", err)
	}
	if _, err := Parse("lanes/x.yaml", []byte(strings.Replace(data, "v1.34}", "v1.35}", 1))); err != nil {
		t.Fatalf("a cluster of the class's minor refused: %v", err)
	}
}
