package lane

import (
	"strings"
	"testing"
)

// The three platform source forms, read for form only.
func TestParseSource(t *testing.T) {
	d := "sha256:" + strings.Repeat("a", 64)
	for raw, want := range map[string]SourceSpec{
		"release:v1.6.2":                         {Kind: SourceRelease, Release: "v1.6.2"},
		"release:v1.6.2@" + d:                    {Kind: SourceRelease, Release: "v1.6.2", Digest: d},
		"manifest:_platform/op.yaml@" + d:        {Kind: SourceManifest, Location: "_platform/op.yaml", Digest: d},
		"manifest:https://h.example/o.yaml@" + d: {Kind: SourceManifest, Location: "https://h.example/o.yaml", Digest: d},
		"checkout:../cozystack":                  {Kind: SourceCheckout, Location: "../cozystack"},
		"../cozystack":                           {Kind: SourceCheckout, Location: "../cozystack"},
	} {
		got, err := ParseSource(raw)
		if err != nil || got != want {
			t.Errorf("%s: %+v %v, want %+v", raw, got, err, want)
		}
		if err == nil && raw != "../cozystack" && got.String() != raw {
			t.Errorf("%s: String() %s", raw, got.String())
		}
	}
	for raw, want := range map[string]string{
		"":                             "is not a platform source",
		"release:":                     "names no release",
		"release:unknown":              "names no release",
		"release:v1.6.2@sha256:ABC":    `"sha256:ABC" is not sha256:<64 lowercase hex>`,
		"manifest:op.yaml":             "has no @sha256:<hex>",
		"manifest:ftp://h/o.yaml@" + d: "is neither a file path nor an https:// URL",
		"checkout:":                    "names no folder",
		"checkout:../cozystack@" + d:   "a checkout is built here, so it takes no digest",
		"https://h.example/o.yaml":     "is not a platform source",
		"relase:v1.6.2":                "is not a platform source",
	} {
		if _, err := ParseSource(raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want %q, got %v", raw, want, err)
		}
	}
}
