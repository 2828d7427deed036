package benchkit

import "flag"

// SetFlags returns the names of the flags of fs given on the command line
// (after fs.Parse), as a set: what a benchmark reads to tell a default from
// an explicit value.
func SetFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
