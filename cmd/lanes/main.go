// Command lanes checks lane files and generates the e2e workflow from them.
//
//	lanes check [--dir lanes]            validate every lane, print its budget sum and headroom
//	lanes workflow write|check [--dir lanes] [--out .github/workflows/e2e.yaml]  (and e2e-lane.yaml beside it)
//	lanes plan --lane <name|path> [--dir lanes]
//
// Exit codes: 0 ok, 2 a lane or the workflow is wrong (configuration error).
package main

import "github.com/cozystack/cozy-e2e/internal/lanescmd"

func main() { lanescmd.Main() }
