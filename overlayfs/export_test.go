package overlayfs

// CommitWithFaults is Commit with a hook called before each write the
// commit makes (op is "stage", "seal", "trash", "place", "meta" or
// "finish"): an error from it stops the commit there, as a refusal of the
// disk would.
func CommitWithFaults(f *Fs, hook func(op, rel string) error) error { return f.commit(nil, hook) }

// RecoverWithFaults is Recover with the same hook.
func RecoverWithFaults(root string, hook func(op, rel string) error) error {
	return recoverRoot(root, hook)
}

// Unchecked makes f check nothing, as without AsUser, until the returned
// function is called: a test reads the view as root does. f must not be in
// use meanwhile.
func Unchecked(f *Fs) (restore func()) {
	as := f.opts.as
	f.opts.as = nil
	return func() { f.opts.as = as }
}
