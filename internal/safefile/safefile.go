package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"unicode/utf8"
)

// ErrNotRegular is wrapped by Read's error for a path that leads to
// anything but a regular file: a device, a FIFO, a socket, a directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by Read's error for a file over its cap.
var ErrTooLarge = errors.New("file too large")

// Read returns the content of the file at path, following symbolic links,
// when it is a regular file of at most max bytes. It opens the file with
// O_NONBLOCK, so that a FIFO (or a device) fails at once instead of holding
// the caller in open, checks what it opened (fstat, so that the file
// checked is the file read), and reads at most max+1 bytes: a file that
// says it is small but goes on (a /proc file) is refused at the cap too.
// Errors name the path and, for a refusal, what it is or its size and the
// cap; they wrap fs.ErrNotExist and the like from the open, ErrNotRegular
// or ErrTooLarge.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: it is %s", ErrNotRegular, typeName(fi.Mode()))}
	}
	if fi.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes, over the cap of %d", ErrTooLarge, fi.Size(), max)}
	}
	// Whole chunks (some /proc files refuse reads of other sizes), until
	// the end or past the cap.
	b := make([]byte, 0, min(fi.Size(), max)+1)
	var chunk [32 << 10]byte
	for {
		n, err := f.Read(chunk[:])
		b = append(b, chunk[:n]...)
		if int64(len(b)) > max {
			return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: more than the cap of %d bytes", ErrTooLarge, max)}
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// typeName names a file mode's type for errors.
func typeName(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// ExcerptLen is the most bytes of a value Excerpt quotes.
const ExcerptLen = 16

// Excerpt quotes s for an error message: the whole of it when it is one
// line of at most ExcerptLen bytes, else its first ExcerptLen bytes at
// most (cut at a character, before any line break) followed by "…" and
// its length, as in "abcdefghijklmnop"… (4096 bytes). The quote escapes
// control characters (strconv.Quote).
func Excerpt(s string) string {
	cut := len(s)
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\r' {
			cut = i
			break
		}
	}
	if cut > ExcerptLen {
		cut = ExcerptLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
	}
	if cut == len(s) {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:cut]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
