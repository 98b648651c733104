// Package diag gathers the evidence of a run into the artifacts folder: it streams events, a
// condition timeline and every VMI's serial console from the moment a pool is created, and on
// failure runs bounded collectors, cheapest and most discriminating first, inside the lane's
// diagnostics reserve. Every byte goes through one writer (Artifacts) that scrubs Secret
// values, kubeconfig credentials, tokens and bootstrap data, and every collector records in
// manifest.json whether it was complete, truncated, failed or declined.
//
// Layout under the artifacts folder (docs/architecture.md, "Artifacts"):
//
//	clusters/<management|tenant>/events.jsonl     events, one JSON object a line, absolute times
//	clusters/<management|tenant>/timeline.jsonl   condition and phase changes of objects no pool owns
//	clusters/<management|tenant>/resources/...    resource dumps (never a Secret)
//	clusters/<management|tenant>/logs/...         previous logs of restarted containers
//	pools/<pool>/timeline.jsonl                   condition and phase changes of the pool's objects
//	pools/<pool>/events.jsonl                     the events of the pool's objects
//	pools/<pool>/consoles/<vmi>/<pod>-<n>.log      serial consoles, one file per launcher container
//	pools/<pool>/...                              the on-failure collectors' files
package diag
