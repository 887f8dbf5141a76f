//go:build linux && !arm64

package guest

const sysFinitModule = -1 // the guest is arm64; elsewhere no module is loaded
