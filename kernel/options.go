package kernel

// Options says how an upper directory is, or will be, mounted. It is a
// struct, not functional options, because it describes a mount that
// Materialize, Import and Mount must agree on (DESIGN.md fixes their
// signatures with it): it is data passed between calls. Run, which
// decides its mount itself, takes functional [RunOption]s for how to run;
// that is the rule: Options for what an upper dir is, RunOption for how
// Run behaves.
type Options struct {
	// UserXattr selects the user.overlay.* xattr namespace, for a mount with
	// the userxattr option (an unprivileged mount inside a user namespace).
	// Without it the trusted.overlay.* namespace is used, which needs
	// CAP_SYS_ADMIN in the initial user namespace to write.
	UserXattr bool
}

// xattrPrefix is the overlay xattr namespace the options select. Exactly
// one namespace is ever written: the kernel shows the other one as an
// ordinary xattr of the merged file.
func (o Options) xattrPrefix() string {
	if o.UserXattr {
		return "user.overlay."
	}
	return "trusted.overlay."
}
