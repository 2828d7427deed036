// Package safefile reads the agent's config files without trusting what
// the path leads to: Read follows symbolic links (a Kubernetes ConfigMap
// volume is made of them) but reads only a regular file, opened without
// blocking (a FIFO never holds the reader in open), and at most a given
// number of bytes (a device or a /proc file that never ends is refused at
// the cap, not read into memory). Excerpt quotes a file's content in an
// error: a short, bounded, one-line excerpt, never the whole of a value
// that may be a secret the path was made to lead to.
//
// This package is internal: it is shared by obol's own packages.
package safefile
