package deviceplugin

// Structured logging keys.
const (
	logKeyPod        = "pod"
	logKeyContainer  = "container"
	logKeyGPU        = "gpu"
	logKeyUUID       = "uuid"
	logKeyUnits      = "units"
	logKeyDevices    = "devices"
	logKeyNode       = "node"
	logKeySocket     = "socket"
	logKeyXID        = "xid"
	logKeyGuess      = "guessedPod"
	logKeyReason     = "reason"
	logKeyRetryAfter = "retryAfter"
	logKeyErr        = "err"
	logKeyChanged    = "changed"
	logKeyResource   = "resource"
)
