package overlayfs

// NameOrder returns the indices of names in the order the Fs lists them,
// sorted as listings are: the floor benchmarks sort with it.
func NameOrder(names []string) []uint32 {
	ks := nameOrder(len(names), func(i int) string { return names[i] })
	out := make([]uint32, len(ks))
	for i, k := range ks {
		out[i] = k.idx
	}
	return out
}
