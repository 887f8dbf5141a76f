// Package torture holds fencegate's crash torture: controller processes
// send fresh, stale and duplicate commands to several actuators (one
// scope shared by two, one interlocked pair, one a relay of a Modbus TCP
// module that outlives the gateway process) through a real Mosquitto
// while the gateway process is killed with SIGKILL, or stopped cleanly,
// at random moments and started again. After every cycle the test checks
// that no fence went back, that every command answered applied is
// covered by the recorded fence, that the outputs equal the recorded
// states after reconciliation, that after a clean stop the controllers
// that resend publish again the commands they wait for as soon as they
// see the gateway online, and that no command was lost; at the end
// it checks the whole history of commands and answers for
// linearizability with porcupine, each scope a fenced register.
//
// Its code is all in _test.go files: porcupine, which only the tests use,
// is never linked into the gateway. `make test` runs a short version;
// `make torture` runs 50 cycles (FENCEGATE_TORTURE_CYCLES), and
// FENCEGATE_TORTURE_SEED replays a run's choices.
package torture
