//go:build race

package overlayfs_test

// raceDetector: the race detector slows pure-Go loops (deflate) tenfold;
// tests that stream big files use smaller ones under it.
const raceDetector = true
