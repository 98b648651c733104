// Package simlane runs the sim lane end to end through its real entry point (bin/e2e run
// --lane sim), as a user and CI do, and holds each run to its contract:
//
//   - green, and under each fault of the sim's catalogue (internal/sim/faults): the verdict
//     names the fault's class and stage for each pool it targets, within 10 s of the fault
//     becoming observable; the evidence named by the verdict exists and shows the cause; the
//     diagnostics fit their 60 s and the artifacts 20 MB; the canary planted by the sim appears
//     in no artifact (faults_test.go);
//   - interrupted by SIGINT or SIGTERM mid-run: it ends within 30 s with an "interrupted"
//     verdict and exit 130, and leaves none of its processes or temp folders behind
//     (interrupt_test.go).
//
// Each run takes a minute or two. The fault runs pack one terminal fault to a pool (scenarios)
// and can be narrowed to any E2E_SIM_FAULT values, ';'-separated: E2E_FAULTS='green;node-tainted@md0'.
// E2E_FAULT_ARTIFACTS=<dir> keeps each run's artifacts in <dir>/<run> for a person to read.
package simlane
