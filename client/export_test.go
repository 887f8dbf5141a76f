package client

// SetStatusHook makes receive call f before it takes each status message,
// so that a test can hold the gateway's retained status back until a
// command was published; nil removes it.
func SetStatusHook(f func(retained bool)) { testHookStatus = f }
