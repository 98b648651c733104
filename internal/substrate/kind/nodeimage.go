package kind

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// NodeImageEnv overrides the lane's kind node image for one run.
const NodeImageEnv = "E2E_KIND_NODE_IMAGE"

// nodeImageRef is <image>:<tag>@sha256:<64 hex>; the image may carry a registry host and port.
var nodeImageRef = regexp.MustCompile(`^([a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*):([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})@(sha256:[0-9a-f]{64})$`)

// NodeImageRef is a kind node image pinned by digest.
type NodeImageRef struct {
	Image, Tag, Digest string
}

// String is the reference as kind and docker take it.
func (r NodeImageRef) String() string { return r.Image + ":" + r.Tag + "@" + r.Digest }

// ParseNodeImage reads E2E_KIND_NODE_IMAGE: an image, its tag (the Kubernetes release, as kind
// tags its node images) and its digest, the release inside Cluster API v1.13's management range.
func ParseNodeImage(v string) (NodeImageRef, error) {
	m := nodeImageRef.FindStringSubmatch(v)
	if m == nil {
		if !strings.Contains(v, "@sha256:") {
			return NodeImageRef{}, fmt.Errorf("has no digest: a node image is pinned by digest (kind supports an image only at the digest its release lists)")
		}
		return NodeImageRef{}, fmt.Errorf("is not <image>:<tag>@sha256:<64 hex>")
	}
	if err := lane.CheckKindNodeVersion(m[2]); err != nil {
		return NodeImageRef{}, err
	}
	return NodeImageRef{Image: m[1], Tag: m[2], Digest: m[3]}, nil
}

// WithNodeImage is lane l with its node image replaced by r, the override's source said: the
// preflight, the node config and the plan then read the image the run uses. l is not changed.
func WithNodeImage(l *lane.Lane, r NodeImageRef) *lane.Lane {
	out := *l
	out.Components = append([]lane.Component(nil), l.Components...)
	node := lane.Component{Name: lane.KindNodeComponent}
	at := -1
	for i, c := range out.Components {
		if c.Name == lane.KindNodeComponent {
			node, at = c, i
		}
	}
	node.Version, node.Image, node.Digest = r.Tag, r.Image, r.Digest
	node.Source = NodeImageEnv + " (the lane pins " + laneNodeImage(l) + ")"
	node.Note = ""
	if at < 0 {
		out.Components = append(out.Components, node)
	} else {
		out.Components[at] = node
	}
	return &out
}

// laneNodeImage is what the lane itself pins, in words.
func laneNodeImage(l *lane.Lane) string {
	for _, c := range l.Components {
		if c.Name == lane.KindNodeComponent {
			return c.Image + ":" + c.Version + "@" + c.Digest
		}
	}
	return "none"
}

// nodeImageSource is where the lane's node image pin comes from.
func nodeImageSource(l *lane.Lane) string {
	for _, c := range l.Components {
		if c.Name == lane.KindNodeComponent && c.Source != "" {
			return c.Source
		}
	}
	return "the lane's component " + lane.KindNodeComponent
}
