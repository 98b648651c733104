package a

// DoThing does the thing.
func DoThing() {
	klog.Infof("Starting thing %s", name)
}
