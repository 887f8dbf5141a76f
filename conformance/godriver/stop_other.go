//go:build !unix

package main

import "errors"

func pauseSelf() error { return errors.New("--stop-after-grant needs SIGSTOP and SIGCONT") }
