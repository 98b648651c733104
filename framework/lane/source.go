package lane

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

var schemeLike = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`)

// Platform source kinds (platform.source, E2E_PLATFORM_SOURCE).
const (
	// SourceRelease is release:<version>[@sha256:<hex>]: the published release asset.
	SourceRelease = "release"
	// SourceManifest is manifest:<path or https URL>@sha256:<hex>: an operator manifest a
	// pull request's CI built, its images already in a registry.
	SourceManifest = "manifest"
	// SourceCheckout is checkout:<dir>: build the operator and packages from a Cozystack
	// checkout with its own make targets.
	SourceCheckout = "checkout"
)

// SourceSpec is a platform source as written, checked for form only (nothing is read).
type SourceSpec struct {
	Kind string
	// Release is the version of a release source.
	Release string
	// Location is a manifest source's path or URL, a checkout source's folder.
	Location string
	// Digest is "sha256:<hex>" when the source pins one.
	Digest string
}

// String is the source as written, with its digest.
func (s SourceSpec) String() string {
	v := s.Location
	if s.Kind == SourceRelease {
		v = s.Release
	}
	if s.Digest != "" {
		v += "@" + s.Digest
	}
	return s.Kind + ":" + v
}

// IsURL says whether a manifest source is fetched over the network.
func (s SourceSpec) IsURL() bool { return strings.HasPrefix(s.Location, "https://") }

// ParseSource reads a platform source: release:<version>[@sha256:<hex>],
// manifest:<path or https URL>@sha256:<hex>, or checkout:<dir> (a bare folder path is read as
// checkout:<dir>). Its error says what form was expected. It reads no file and no URL.
func ParseSource(raw string) (SourceSpec, error) {
	kind, rest, ok := strings.Cut(raw, ":")
	if !ok || (kind != SourceRelease && kind != SourceManifest && kind != SourceCheckout) {
		// A bare folder path is a checkout; anything that looks like a scheme is a typo.
		if raw != "" && (!ok || !schemeLike.MatchString(kind)) {
			return SourceSpec{Kind: SourceCheckout, Location: raw}, nil
		}
		return SourceSpec{}, fmt.Errorf("%q is not a platform source: want release:<version>[@sha256:<hex>], manifest:<path or https URL>@sha256:<hex> or checkout:<dir>", raw)
	}
	s := SourceSpec{Kind: kind}
	body := rest
	if i := strings.LastIndex(rest, "@sha256:"); i >= 0 {
		body, s.Digest = rest[:i], rest[i+1:]
		if !digestRe.MatchString(s.Digest) {
			return s, fmt.Errorf("%s: %q is not sha256:<64 lowercase hex>", raw, s.Digest)
		}
	}
	switch kind {
	case SourceRelease:
		if body == "" || body == DigestUnknown {
			return s, fmt.Errorf("%s names no release (release:v1.6.2)", raw)
		}
		s.Release = body
	case SourceManifest:
		if body == "" {
			return s, fmt.Errorf("%s names no manifest (manifest:<path or https URL>@sha256:<hex>)", raw)
		}
		if strings.Contains(body, "://") {
			u, err := url.Parse(body)
			if err != nil || u.Scheme != "https" || u.Host == "" {
				return s, fmt.Errorf("%s: %q is neither a file path nor an https:// URL", raw, body)
			}
		}
		if s.Digest == "" {
			return s, fmt.Errorf("%s has no @sha256:<hex>: a manifest source is applied only at the digest its CI recorded (manifest:%s@sha256:<hex>)", raw, body)
		}
		s.Location = body
	case SourceCheckout:
		if body == "" {
			return s, fmt.Errorf("%s names no folder (checkout:<dir>)", raw)
		}
		if s.Digest != "" {
			return s, fmt.Errorf("%s: a checkout is built here, so it takes no digest", raw)
		}
		s.Location = body
	}
	return s, nil
}
