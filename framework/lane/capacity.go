package lane

// CheckCapacity holds a kind lane's runner to the worker VMs its suites run at once: workers
// VMs of perWorkerGiB each (guest and virtualisation overhead) must fit in runner.memoryGiB,
// else the surplus VMIs stay Pending and the run can only report a deadline. It counts the
// workers alone, so a lane it passes may still be short of memory for its management cluster.
// Other substrates run no worker VM on the runner.
func (l *Lane) CheckCapacity(workers int, perWorkerGiB float64, why string) Errors {
	v := l.validator()
	if l.Substrate != SubstrateKind {
		return nil
	}
	need := float64(workers) * perWorkerGiB
	if need > float64(l.Runner.MemoryGiB) {
		v.fail("runner.memoryGiB", "%d GiB cannot hold the %d worker VMs the suites run at once (%s), %.1f GiB each: %.1f GiB; "+
			"raise runner.memoryGiB (and the runner) or run fewer workers at once", l.Runner.MemoryGiB, workers, why, perWorkerGiB, need)
	}
	if len(v.errs) == 0 {
		return nil
	}
	return v.errs
}

// Refuse is one problem of the lane at field path, with its file and line: a check made outside
// this package (the sim's capacity) speaks like lanes-check.
func (l *Lane) Refuse(path, format string, args ...any) Errors {
	v := l.validator()
	v.fail(path, format, args...)
	return v.errs
}
