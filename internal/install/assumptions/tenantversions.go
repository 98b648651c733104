package assumptions

import (
	"fmt"
	"strings"
)

// TenantVersion is one tenant Kubernetes release the platform's Kubernetes chart offers: the
// version key an app's spec.version takes ("v1.35", from the values schema's enum) and the
// release the chart renders for it ("v1.35.6", from its files/versions.yaml), which the tenant
// control plane reports and the Talos workers' kubelet runs.
type TenantVersion struct {
	Version, Patch string
}

// TenantVersions are what the chart offers at one revision, newest first, and where it says so.
type TenantVersions struct {
	// Revision is the cozystack/cozystack revision read (a tag or a commit).
	Revision string
	Offered  []TenantVersion
	// Schema is the values schema's version enum, path:lines; Patches the version map.
	Schema, Patches string
}

// Keys are the offered version keys, newest first.
func (tv TenantVersions) Keys() []string {
	out := make([]string, len(tv.Offered))
	for i, v := range tv.Offered {
		out[i] = v.Version
	}
	return out
}

// Find is the offered release of version key v.
func (tv TenantVersions) Find(v string) (TenantVersion, bool) {
	for _, o := range tv.Offered {
		if o.Version == v {
			return o, true
		}
	}
	return TenantVersion{}, false
}

// String names the revision and the offer, with its source: "cozystack v1.6.1 offers v1.35,
// v1.34, ... (packages/apps/kubernetes/values.schema.json:172-183)".
func (tv TenantVersions) String() string {
	return fmt.Sprintf("cozystack %s offers %s (%s)", ShortRevision(tv.Revision), strings.Join(tv.Keys(), ", "), tv.Schema)
}

// ShortRevision is a commit as its first 12 digits, a tag as it is.
func ShortRevision(rev string) string {
	if len(rev) == 40 {
		return rev[:12]
	}
	return rev
}

// SimCozystack is the Cozystack release whose Kubernetes chart the sim renders (hack/tools
// materialises it from the module zip, COZYSTACK_VERSION in hack/tools/build.sh; a test of
// internal/sim/realupstream holds SimTenantVersions to that chart's own files).
const SimCozystack = "v1.6.1"

// offered is the same offer at every revision read: the values schema's enum for `version`
// and the chart's files/versions.yaml, line for line.
var offered = []TenantVersion{
	{"v1.35", "v1.35.6"}, {"v1.34", "v1.34.9"}, {"v1.33", "v1.33.13"}, {"v1.32", "v1.32.13"}, {"v1.31", "v1.31.14"},
}

// KindTenantVersions are what the Kubernetes chart offers at CozystackMain (the same at
// v1.6.2, values.schema.json:172-183): a kind or existing lane's clusters must take their
// versions from it. The platform installed at run time has the last word: its
// ApplicationDefinition carries the same schema, and cozystack-api refuses an app outside it.
func KindTenantVersions() TenantVersions {
	return TenantVersions{Revision: CozystackMain, Offered: offered,
		Schema:  "packages/apps/kubernetes/values.schema.json:203-214",
		Patches: "packages/apps/kubernetes/files/versions.yaml:1-5"}
}

// SimTenantVersions are what the Kubernetes chart offers at SimCozystack, the chart the sim
// renders: a sim lane's clusters must take their versions from it.
func SimTenantVersions() TenantVersions {
	return TenantVersions{Revision: SimCozystack, Offered: offered,
		Schema:  "packages/apps/kubernetes/values.schema.json:172-183",
		Patches: "packages/apps/kubernetes/files/versions.yaml:1-5"}
}

// tenantReleases says each offered version's release: "v1.35 v1.35.6, v1.34 v1.34.9, ...".
func tenantReleases(tv TenantVersions) string {
	out := make([]string, len(tv.Offered))
	for i, v := range tv.Offered {
		out[i] = v.Version + " " + v.Patch
	}
	return strings.Join(out, ", ")
}
