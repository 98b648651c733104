package e2ecmd

import (
	"fmt"
	"os"
	"strings"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/substrate/kind"
)

// reproEnvironment is the environment a repro runs with: the run's recorded choices, never its
// E2E_REUSE (a kept cluster of the lane's name is refused unless the person asks to reuse it
// now), and the platform the run installed: a release or manifest at the digest the run
// verified, a checkout at the folder it built, if that folder is on this machine. The person's
// own E2E_PLATFORM_SOURCE is taken only when it pins the recorded digest (or, for a checkout,
// names their own checkout). The error says plainly what cannot be reproduced here.
func reproEnvironment(recorded map[string]string, rec *install.PlatformRecord, getenv func(string) string, commitOf func(dir string) string) (map[string]string, []string, error) {
	env := map[string]string{}
	var notes []string
	for k, v := range recorded {
		if k == "E2E_REUSE" {
			notes = append(notes, "the run had E2E_REUSE="+v+"; a repro does not carry it over: a kept cluster of the lane's name is refused unless you set E2E_REUSE=1 yourself")
			continue
		}
		env[k] = v
	}
	if ran, ok := recorded[kind.NodeImageEnv]; ok {
		if own := getenv(kind.NodeImageEnv); own != "" && own != ran {
			return nil, notes, fmt.Errorf("%s=%s is not the node image the run created its kind nodes from (%s): a repro runs the recorded one; unset it", kind.NodeImageEnv, own, ran)
		}
		notes = append(notes, "kind node image "+ran+", the one the run used")
	}
	if rec == nil {
		return env, notes, nil
	}
	own := getenv("E2E_PLATFORM_SOURCE")
	switch rec.Kind {
	case lane.SourceRelease, lane.SourceManifest:
		if rec.Pinned == "" {
			return nil, notes, fmt.Errorf("the run's platform record has no pinned source (%s); it cannot be reproduced exactly", rec.Source)
		}
		pinned, err := lane.ParseSource(rec.Pinned)
		if err != nil {
			return nil, notes, fmt.Errorf("the run's platform record: %w", err)
		}
		if own != "" {
			mine, err := lane.ParseSource(own)
			if err != nil || mine.Digest != pinned.Digest {
				return nil, notes, fmt.Errorf("E2E_PLATFORM_SOURCE=%s does not pin %s, the operator manifest the run applied (%s): a repro applies the recorded digest; unset it or pin that digest", own, pinned.Digest, rec.Pinned)
			}
			env["E2E_PLATFORM_SOURCE"] = own
			notes = append(notes, "platform from E2E_PLATFORM_SOURCE="+own+", at the run's digest")
			return env, notes, nil
		}
		if pinned.Kind == lane.SourceManifest && !pinned.IsURL() {
			if _, err := os.Stat(pinned.Location); err != nil {
				return nil, notes, fmt.Errorf("the run applied the operator manifest %s (%s), which does not exist on this machine: download it (the run's CI artifact) and set E2E_PLATFORM_SOURCE=manifest:<its path>@%s", pinned.Location, pinned.Digest, pinned.Digest)
			}
		}
		env["E2E_PLATFORM_SOURCE"] = rec.Pinned
		notes = append(notes, "platform "+rec.Pinned+", the digest the run verified")
	case lane.SourceCheckout:
		at := ""
		if rec.CheckoutCommit != "" {
			at = " at commit " + rec.CheckoutCommit
		}
		if own != "" {
			env["E2E_PLATFORM_SOURCE"] = own
			notes = append(notes, fmt.Sprintf("platform from E2E_PLATFORM_SOURCE=%s; the run built checkout %s%s: make sure yours is at that commit", own, rec.Checkout, at))
			return env, notes, nil
		}
		if st, err := os.Stat(rec.Checkout); err != nil || !st.IsDir() {
			return nil, notes, fmt.Errorf("the run built its platform from the checkout %s%s, and that folder does not exist on this machine: check out cozystack/cozystack%s and set E2E_PLATFORM_SOURCE=checkout:<that folder>", rec.Checkout, at, at)
		}
		env["E2E_PLATFORM_SOURCE"] = "checkout:" + rec.Checkout
		if head := commitOf(rec.Checkout); rec.CheckoutCommit != "" && head != rec.CheckoutCommit {
			notes = append(notes, fmt.Sprintf("the checkout %s is at %s, the run built %s: `git -C %s checkout %s` reproduces the platform too", rec.Checkout, orUnknown(head), rec.CheckoutCommit, rec.Checkout, rec.CheckoutCommit))
		} else {
			notes = append(notes, "platform from checkout "+rec.Checkout+at)
		}
	default:
		return nil, notes, fmt.Errorf("the run's platform record names a source kind %q this harness does not know", rec.Kind)
	}
	return env, notes, nil
}

// gitCommit is the commit checked out in dir, "" when it cannot tell.
func gitCommit(dir string) string {
	out, err := gitOutput(dir, "rev-parse", "HEAD")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}
