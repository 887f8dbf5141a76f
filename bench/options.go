package bench

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// Check fills in o's defaults and checks its figures (not the gateway
// command or the broker, which Run checks): an error wraps ErrUsage and
// names the flag of gateway bench to correct. Run checks again.
func (o *Options) Check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
	}
	for _, p := range o.Profiles {
		if !slices.Contains(Profiles, p) && p != Soak && p != All {
			return bad("--profile %q: want %s, %s or %s", p, strings.Join(Profiles, ", "), Soak, All)
		}
	}
	soak := slices.Contains(o.Profiles, Soak)
	if soak && len(o.Profiles) > 1 {
		return bad("--profile %s: the soak runs alone (it lasts minutes and judges one gateway): give --profile %s without other profiles", strings.Join(o.Profiles, ","), Soak)
	}
	if len(o.Profiles) == 0 || slices.Contains(o.Profiles, All) {
		o.Profiles = Profiles
	}
	if err := o.checkSoak(bad); err != nil {
		return err
	}
	switch {
	case o.Actuators < 0 || o.Actuators > MaxActuators:
		return bad("--actuators %d: want 1 to %d (the sim board's outputs: GPIO0 to GPIO27 and its expanders' lines)", o.Actuators, MaxActuators)
	case o.Controllers < 0:
		return bad("--controllers %d: want 1 or more", o.Controllers)
	case o.Window < 0 || o.Window > maxWindow:
		return bad("--window %d: want 1 to %d", o.Window, maxWindow)
	case o.Commands < 0:
		return bad("--commands %d: want 1 or more", o.Commands)
	case o.Commands > 0 && o.Duration > 0:
		return bad("give --commands or --duration, not both")
	case !soak && (o.Duration < 0 || o.Duration > time.Hour):
		return bad("--duration %v: want more than 0 and at most 1h", o.Duration)
	case o.SDCardDelay < 0 || o.SDCardDelay > time.Second:
		return bad("--sdcard-delay %v: want 0 to 1s", o.SDCardDelay)
	case o.Warmup > time.Hour:
		return bad("--warmup %v: want at most 1h", o.Warmup)
	}
	for _, p := range o.Profiles {
		for _, size := range o.sizes(p) {
			n, m, _ := o.shape(p, size)
			if m > n && p != Shared {
				return bad("profile %s: %d controllers for %d actuators: each controller owns one actuator; give --controllers at most --actuators", p, m, n)
			}
			if p == Storm && m < 2 {
				return bad("profile storm needs at least 2 controllers (flapping ones and calm ones)")
			}
			if o.Commands > 0 && o.Commands < m {
				return bad("--commands %d: at least one per controller (%d) in profile %s", o.Commands, m, p)
			}
		}
	}
	if slices.Equal(o.Profiles, []string{SDCard}) && !o.CommitDelay {
		return bad("%s", errNoDelay)
	}
	if o.Duration == 0 && o.Commands == 0 {
		o.Duration = DefaultDuration
		if soak {
			o.Duration = DefaultSoakDuration
		}
	}
	if o.Warmup == 0 {
		o.Warmup = DefaultWarmup
	}
	if o.SDCardDelay == 0 {
		o.SDCardDelay = DefaultSDCardDelay
	}
	if o.StoreDir == "" {
		o.StoreDir = os.TempDir()
	}
	return nil
}

// checkSoak checks the soak's options, and that only the soak has a
// SampleInterval; it fills in the soak's defaults.
func (o *Options) checkSoak(bad func(string, ...any) error) error {
	if !o.soakOnly() {
		if o.SampleInterval != 0 {
			return bad("--sample-interval: only the soak takes it (--profile %s)", Soak)
		}
		return nil
	}
	switch {
	case o.Commands > 0:
		return bad("--commands: the soak runs for a --duration (default %v), not a number of commands", DefaultSoakDuration)
	case o.Duration < 0 || o.Duration > maxSoakDuration:
		return bad("--duration %v: want more than 0 and at most %v for the soak", o.Duration, maxSoakDuration)
	case o.SampleInterval < 0 || (o.SampleInterval > 0 && o.SampleInterval < minSampleEvery):
		return bad("--sample-interval %v: want %v or more", o.SampleInterval, minSampleEvery)
	case o.Window > maxSoakWindow:
		return bad("--window %d: the soak's duplicates must stay among the gateway's %d recent commands of their scope: give at most %d",
			o.Window, fence.Window, maxSoakWindow)
	}
	if o.Duration == 0 {
		o.Duration = DefaultSoakDuration
	}
	if o.SampleInterval == 0 {
		o.SampleInterval = DefaultSampleInterval
	}
	if n := int(o.Duration/o.SampleInterval) + 1; n < minSoakSamples {
		return bad("--duration %v with --sample-interval %v: %d samples, and the soak needs at least %d to judge growth (a warm-up and thirds to compare); give a longer --duration or a shorter --sample-interval",
			o.Duration, o.SampleInterval, n, minSoakSamples)
	}
	return nil
}

// soakOnly reports whether o runs the soak (which runs alone).
func (o *Options) soakOnly() bool { return slices.Equal(o.Profiles, []string{Soak}) }

// errNoDelay is why the sdcard profile does not run in a normal build.
const errNoDelay = "the sdcard profile needs a gateway built with -tags failpoints, which can slow its store's commits " +
	"(make bench builds one; or go build -tags failpoints ./cmd/gateway); this build never slows its store"

// sizes returns the sizes a profile runs at, for shape: the fleet's
// actuators, the shared profile's controllers, one size (0) for the
// others; one only where a flag sets that figure.
func (o *Options) sizes(profile string) []int {
	switch {
	case profile == Fleet && o.Actuators == 0:
		return fleetSizes
	case profile == Shared && o.Actuators == 0 && o.Controllers == 0:
		return sharedSizes
	}
	return []int{0}
}

// shape returns a profile's actuators, controllers and window; size is
// the fleet's actuators or the shared profile's controllers (see sizes),
// ignored by the other profiles.
func (o *Options) shape(profile string, size int) (actuators, controllers, window int) {
	switch profile {
	case Single:
		actuators, window = 1, 1
	case Fleet, SDCard:
		actuators, window = fleetSizes[0], fleetWindow
		if size > 0 {
			actuators = size
		}
	case Storm:
		actuators, window = stormActuators, stormWindow
	case Soak:
		actuators, window = soakActuators, soakWindow
	case Shared:
		actuators, window = sharedActuators, sharedWindow
	}
	if o.Actuators > 0 {
		actuators = o.Actuators
	}
	controllers = actuators
	if profile == Shared {
		controllers = sharedSizes[0]
		if size > 0 {
			controllers = size
		}
	}
	if o.Controllers > 0 {
		controllers = o.Controllers
	}
	if o.Window > 0 {
		window = o.Window
	}
	return actuators, controllers, window
}

// limit returns a measured phase's limit for controller i of n.
func (o *Options) limit(n int) func(i int) limit {
	deadline := time.Now().Add(o.Duration)
	return func(i int) limit {
		if o.Commands > 0 {
			return limit{count: split(o.Commands, n, i)}
		}
		return limit{deadline: deadline}
	}
}

// phaseLimit is the progress bar's view of a measured phase.
func (o *Options) phaseLimit() limit {
	if o.Commands > 0 {
		return limit{count: o.Commands}
	}
	return limit{deadline: time.Now().Add(o.Duration)}
}
