package diag

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// listPage is the page size of every list a collector makes.
const listPage = 500

func listOptions(continueToken string) metav1.ListOptions {
	return metav1.ListOptions{Limit: listPage, Continue: continueToken}
}

// stamp is an absolute time as every artifact writes it: RFC 3339 with nanoseconds, in UTC.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// epoch is t in seconds since the Unix epoch, with milliseconds.
func epoch(t time.Time) string { return fmt.Sprintf("%.3f", float64(t.UnixMilli())/1000) }
