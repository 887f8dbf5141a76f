package service

import (
	"fmt"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/pwmio"
)

// chipWait is how long openPWM waits for a PWM controller to appear: at
// boot, udev may still be loading its driver when the gateway starts.
const chipWait = 20 * time.Second

// openPWM exports the configuration's PWM channels and sets their
// frequency; their duty stays as it is until the bank drives them.
func (g *gateway) openPWM() error {
	g.pwm = map[string]*pwmio.Channel{}
	for _, a := range g.cfg.Actuators {
		if a.PWM == nil {
			continue
		}
		deadline := time.Now().Add(chipWait)
		for err := pwmio.Find(pwmio.DefaultSysfs, a.PWM.Conf()); err != nil && time.Now().Before(deadline); err = pwmio.Find(pwmio.DefaultSysfs, a.PWM.Conf()) {
			g.log.Info("waiting for the PWM controller", "actuator", a.Name, "chip", a.PWM.Chip, "err", err)
			time.Sleep(time.Second)
		}
		ch, err := pwmio.Open(pwmio.DefaultSysfs, a.PWM.Conf())
		if err != nil {
			return fmt.Errorf("service: actuator %s: %w", a.Name, err)
		}
		g.pwm[a.Output()] = ch
	}
	return nil
}

// setpoint returns a set-point output by its canonical name: a PWM
// channel, or a register on a Modbus bus.
func (g *gateway) setpoint(name string) (actuator.Setpoint, error) {
	if ch, ok := g.pwm[name]; ok {
		return ch, nil
	}
	if o, ok := g.modbus[name]; ok {
		return o, nil
	}
	return nil, fmt.Errorf("no set-point output %s", name)
}

// duties are the set-point outputs' recorded set-points, for the metrics.
func (g *gateway) duties() map[string]fence.Duty {
	out := map[string]fence.Duty{}
	for _, a := range g.cfg.Actuators {
		if !a.IsSetpoint() {
			continue
		}
		if o, err := g.bank.Output(a.Name); err == nil {
			out[a.Name] = o.Duty
		}
	}
	return out
}

// pwmFindings are gateway check's findings on the PWM channels: whether
// the kernel has each one's chip, read without exporting anything.
func pwmFindings(cfg *config.Config, fsys pwmio.FS) []Finding {
	var out []Finding
	for _, a := range cfg.Actuators {
		if a.PWM == nil {
			continue
		}
		c := a.PWM.Conf()
		if err := pwmio.Find(fsys, c); err != nil {
			out = append(out, Finding{Step: "pwm", Warning: true, Text: fmt.Sprintf("actuator %s: %v", a.Name, err)})
			continue
		}
		out = append(out, Finding{Step: "pwm", Text: fmt.Sprintf("actuator %s: %s at %d Hz; not exported (run does)", a.Name, c.Name(), c.Frequency)})
	}
	return out
}
