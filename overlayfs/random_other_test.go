//go:build !linux

package overlayfs_test

import (
	"errors"
	"testing"
)

// fuzzRandom does nothing: the random differential compares with Linux.
func fuzzRandom(*testing.T, []byte) {}

// bindBeside makes no bind mounts: they are Linux's here.
func bindBeside(string, map[string]string) (func(), error) {
	return func() {}, errors.ErrUnsupported
}
