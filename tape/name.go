package tape

import "strings"

// FileName returns the file name a tape of test in package pkg gets in
// the EnvDir directory: the import path and test name with every byte
// outside [A-Za-z0-9._-] replaced by '_', joined by "__", plus ".tape".
// Subtest slashes become '_' too, so every test has one flat file.
func FileName(pkg, test string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '.', r == '-', r == '_':
				return r
			}
			return '_'
		}, s)
	}
	if pkg == "" {
		return clean(test) + ".tape"
	}
	return clean(pkg) + "__" + clean(test) + ".tape"
}
