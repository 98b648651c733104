package join

// The signals the detectors read that no Go type the harness imports names. Each has a row in
// docs/signals.md, with the upstream source that produces it (test/signals fails otherwise).
const (
	// conditionDataSecretAvailable and reasonDataSecretGenerationFailed: a bootstrap provider
	// that cannot generate a Machine's bootstrap data (siderolabs/cluster-api-bootstrap-provider-talos
	// v0.6.12 api/v1alpha3/conditions.go:19,31, set at controllers/talosconfig_controller.go:265).
	conditionDataSecretAvailable     = "DataSecretAvailable"
	reasonDataSecretGenerationFailed = "DataSecretGenerationFailed"

	// registryRefusalPattern matches what CDI's importer says when the registry will never serve
	// the image: wrong credentials, no such repository or tag, no such manifest (the importer's
	// termination message, "Unable to process data: <error>", kubevirt/containerized-data-importer
	// v1.64.0 cmd/cdi-importer/importer.go:193, reaches the DataVolume's Running condition,
	// pkg/controller/util.go:353-380). Server errors and timeouts are not in it: those the importer
	// retries, and a stall ends at the deadline.
	registryRefusalPattern = `(?i)\b401\b|\b403\b|\b404\b|unauthorized|forbidden|manifest unknown|name unknown|access to the resource is denied`

	// reasonErrClaimNotValid is CDI's reason for a DataVolume whose claim it cannot render from
	// its spec and its class (kubevirt/containerized-data-importer v1.64.0
	// pkg/controller/common/util.go ErrClaimNotValid; on the Bound and Ready conditions,
	// pkg/controller/datavolume/controller-base.go lines 517-523, 884-890).
	reasonErrClaimNotValid = "ErrClaimNotValid"

	// insufficientPrefix starts kube-scheduler's reason for a Pod no Node has room for
	// ("Insufficient memory", k8s.io/kubernetes v1.35.4 pkg/scheduler/framework/plugins/
	// noderesources/fit.go:673-726), carried in the launcher's PodScheduled=False message.
	insufficientPrefix = "Insufficient"

	// csrNodePrefix starts the common name of a kubelet's certificate requests, system:node:<node>
	// (k8s.io/kubernetes v1.35.4 pkg/kubelet/certificate/kubelet.go:64,233).
	csrNodePrefix = "system:node:"

	// copiedFailurePrefix opens the failureMessage Cluster API copies from a provider's object
	// onto the Machine ("Failure detected from referenced resource <gvk> with name %q: <message>",
	// sigs.k8s.io/cluster-api v1.13.6 internal/controllers/machine/machine_controller_phases.go:77-79).
	copiedFailurePrefix = "Failure detected from referenced resource "

	// admissionRefusalPattern matches the apiserver's refusal of an object, which the same request
	// meets again on every retry: an admission webhook's denial ("admission webhook %q denied the
	// request", k8s.io/apiserver v0.35.4 pkg/admission/plugin/webhook/errors/statuserror.go:29,47-52),
	// an admission policy's ("ValidatingAdmissionPolicy '%s' [with binding '%s'] denied request",
	// pkg/admission/plugin/policy/validating/dispatcher.go:294-296), and an object the API finds
	// invalid (`%s %q is invalid: %v`, k8s.io/apimachinery v0.35.4 pkg/api/errors/errors.go:307-309).
	admissionRefusalPattern = `admission webhook "[^"]+" denied the request|ValidatingAdmissionPolicy '[^']+' (with binding '[^']+' )?denied request|"[^"]+" is invalid`

	// webhookCallFailed is how the apiserver says it could not call a webhook (unreachable,
	// timed out, an answer it could not read), in the error it fails the request with under
	// failurePolicy Fail (k8s.io/apiserver v0.35.4 pkg/util/webhook/error.go:36).
	webhookCallFailed = "failed calling webhook"

	// Startup taints no k8s.io or Cluster API Go type the harness imports names:
	// taintCloudProviderUninitialized is the external cloud provider's (k8s.io/cloud-provider
	// v0.35.4 api/well_known_taints.go:24), taintCiliumAgentNotReady Cilium's until its agent
	// runs on the Node (Cozystack tolerates it, packages/core/installer/templates/cozystack-operator.yaml:230).
	taintCloudProviderUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
	taintCiliumAgentNotReady        = "node.cilium.io/agent-not-ready"
)
