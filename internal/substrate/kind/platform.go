package kind

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/cluster-api/test/framework/bootstrap"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// platformFetchTimeout bounds the preflight's download of a release or manifest source.
const platformFetchTimeout = 60 * time.Second

// checkPlatform resolves the platform source before anything is created and proves it can be
// used: a release or manifest source is downloaded and verified against its sha256 now (the
// components phase applies exactly those bytes); a checkout is checked for the programs and
// the registry its build needs. The finding says what is missing.
func (s *Substrate) checkPlatform(ctx context.Context) Finding {
	src, err := install.ResolvePlatformSource(s.lane, s.opts.PlatformSource)
	if err != nil {
		return Finding{Check: "platform", Detail: err.Error()}
	}
	s.source = &src
	if src.Kind == lane.SourceCheckout {
		if err := s.checkoutBuild(src).Check(ctx); err != nil {
			return Finding{Check: "platform", Detail: err.Error()}
		}
		return Finding{Check: "platform", OK: true, Detail: fmt.Sprintf("checkout %s, built in the components phase (packages pushed to %s)", src.Checkout, s.opts.PlatformRegistry)}
	}
	return s.fetchPlatform(ctx, src)
}

// fetchPlatform downloads a release or manifest source's operator manifest and verifies its
// sha256, keeping the bytes for the components phase.
func (s *Substrate) fetchPlatform(ctx context.Context, src install.PlatformSource) Finding {
	fctx, cancel := context.WithTimeout(ctx, platformFetchTimeout)
	defer cancel()
	m, err := install.Fetch(fctx, src.OperatorManifest(), src.Digest)
	if err != nil {
		return Finding{Check: "platform", Detail: fmt.Sprintf("%s: %v", src.Raw, err)}
	}
	s.manifest = m
	return Finding{Check: "platform", OK: true, Detail: fmt.Sprintf("operator manifest %s, %s verified", m.Source, m.SHA256)}
}

// checkoutBuild is the build of a checkout source into the lane's kind cluster.
func (s *Substrate) checkoutBuild(src install.PlatformSource) install.CheckoutBuild {
	run := s.opts.runner
	if run == nil {
		// The targets' output (docker builds among it) goes to its own artifact, not the terminal.
		run = install.ExecRunner{Log: s.artifactWriter("platform-build.log")}
	}
	load := s.opts.loader
	if load == nil {
		load = kindImageLoader(s.name)
	}
	return install.CheckoutBuild{Dir: src.Checkout, Registry: s.opts.PlatformRegistry, Run: run, Load: load}
}

// platformManifest is the operator manifest the components phase applies, and records where it
// came from (substrate/platform.json, which `make repro` reads).
func (s *Substrate) platformManifest(ctx context.Context, src install.PlatformSource) (*install.Manifest, error) {
	rec := install.NewPlatformRecord(src)
	m := s.manifest
	if src.Kind == lane.SourceCheckout {
		var res install.CheckoutResult
		var err error
		m, res, err = s.checkoutBuild(src).Build(ctx)
		rec.CheckoutCommit, rec.OperatorImage, rec.PackagesURL = res.Commit, res.OperatorImage, res.PackagesURL
		if res.Rendered != nil {
			rec.RenderedSHA256 = res.Rendered.SHA256
		}
		if err != nil {
			s.writeRecord(rec)
			return nil, err
		}
	}
	if m == nil {
		// The preflight did not run (it always does in a run); fetch and verify now.
		var err error
		if m, err = install.Fetch(ctx, src.OperatorManifest(), src.Digest); err != nil {
			return nil, &substrate.ConfigurationError{Err: fmt.Errorf("platform source %s: %w", src.Raw, err)}
		}
	}
	rec.Manifest, rec.ManifestSHA256 = m.Source, m.SHA256
	s.writeRecord(rec)
	return m, nil
}

func (s *Substrate) writeRecord(rec install.PlatformRecord) {
	if s.opts.Artifacts == "" {
		return
	}
	if err := rec.Write(s.opts.Artifacts); err != nil {
		fmt.Fprintf(s.opts.Log, "kind: %s: %v\n", install.PlatformRecordFile, err)
	}
}

// kindImageLoader loads images from the local docker into every node of cluster, with Cluster
// API's test framework (sigs.k8s.io/cluster-api/test/framework/bootstrap, kind_util.go:132 at
// v1.13.7), which saves each image and imports it through kind's node utilities.
func kindImageLoader(cluster string) install.ImageLoader {
	return func(ctx context.Context, images []string) error {
		in := bootstrap.LoadImagesToKindClusterInput{Name: cluster}
		for _, img := range images {
			in.Images = append(in.Images, clusterctl.ContainerImage{Name: img, LoadBehavior: clusterctl.MustLoadImage})
		}
		return bootstrap.LoadImagesToKindCluster(ctx, in)
	}
}
