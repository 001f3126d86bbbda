//go:build linux && !amd64

package kernel

// legacyChownCalls: this architecture has fchownat and fchown only.
var legacyChownCalls []chownCall
