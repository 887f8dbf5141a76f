package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/fencegate/fencegate/modbusio/modbussim"
)

// Modbus is the simulator's Modbus relay module, as GET /api/sim shows it.
type Modbus struct {
	URL     string `json:"url"`
	Powered bool   `json:"powered"`
	// Coils are its relays' levels, by actuator.
	Coils map[string]bool `json:"coils"`
	// Registers are its set-point registers' values, by actuator, and
	// Full their values at 100 %.
	Registers map[string]uint16 `json:"registers"`
	Full      map[string]int    `json:"full"`
}

// startModbus powers on the relay module on a loopback port of its own.
func startModbus() (*modbussim.Module, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	m, err := modbussim.Start(fmt.Sprintf("tcp://127.0.0.1:%d", port), 1)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return m, nil
}

func (s *Sim) modbusInfo() Modbus {
	info := Modbus{URL: s.modbus.URL(), Powered: s.modbus.Powered(), Coils: map[string]bool{}, Registers: map[string]uint16{},
		Full: map[string]int{}}
	for _, a := range Actuators {
		if a.Coil != nil {
			info.Coils[a.Name] = s.modbus.Coil(*a.Coil)
		}
		if a.Register != nil {
			info.Registers[a.Name] = s.modbus.Register(*a.Register)
			info.Full[a.Name] = a.Full
		}
	}
	return info
}

// serveModbus adds the dashboard's hands on the relay module:
//
//	POST /api/sim/modbus/power {"on": false}   cut its power (its relays drop), or restore it
//	POST /api/sim/modbus/button/{actuator}     press the module's own button of that relay: it
//	                                           switches behind the gateway's back (a set-point's
//	                                           knob: its register moves a quarter on)
func (s *Sim) serveModbus(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/sim/modbus/power", func(w http.ResponseWriter, r *http.Request) {
		var body struct{ On *bool }
		if err := json.NewDecoder(io.LimitReader(r.Body, 1024)).Decode(&body); err != nil || body.On == nil {
			http.Error(w, `want {"on":true} or {"on":false}`, http.StatusBadRequest)
			return
		}
		if !*body.On {
			s.modbus.PowerCut()
		} else if err := s.modbus.PowerOn(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /api/sim/modbus/button/{actuator}", func(w http.ResponseWriter, r *http.Request) {
		i := slices.IndexFunc(Actuators, func(a Actuator) bool {
			return a.Name == r.PathValue("actuator") && (a.Coil != nil || a.Register != nil)
		})
		if i < 0 {
			http.Error(w, "no actuator of that name on the Modbus module", http.StatusNotFound)
			return
		}
		if !s.modbus.Powered() {
			http.Error(w, "the module's power is off", http.StatusConflict)
			return
		}
		if a := Actuators[i]; a.Register != nil {
			s.modbus.SetRegister(*a.Register, uint16((int(s.modbus.Register(*a.Register))+a.Full/4)%(a.Full+1)))
		} else {
			s.modbus.SetCoil(*a.Coil, !s.modbus.Coil(*a.Coil))
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
