package wire

import "strings"

// EscapeFormat returns s with every "%" doubled. kube-scheduler v1.37 records the message of a
// failed scheduling attempt (a filter answer's reasons and Error, a bind's Error) as the format
// of its FailedScheduling event (schedule_one.go, handleSchedulingFailure: Eventf(..., msg)), so
// a "%" in a user's value echoed there (a gpu-model annotation such as "A100%d") would be read
// as a verb and printed as %!d(MISSING). Every message the extender hands kube-scheduler goes
// through here; s itself when it has no "%".
func EscapeFormat(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	return strings.ReplaceAll(s, "%", "%%")
}
