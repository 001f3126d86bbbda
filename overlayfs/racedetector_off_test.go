//go:build !race

package overlayfs_test

const raceDetector = false
