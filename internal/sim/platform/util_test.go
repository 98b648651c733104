package platform

import "fmt"

func fmtSprint(v any) string { return fmt.Sprint(v) }
