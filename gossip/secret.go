package gossip

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrSecret is wrapped by every LoadSecret error about the file's content.
var ErrSecret = errors.New("gossip: bad secret key")

// LoadSecret reads a memberlist key from path: 16, 24 or 32 bytes written as
// hex (32, 48 or 64 hex digits) or standard base64 (padded or not), with
// surrounding whitespace ignored. Text made only of hex digits is read as
// hex. Errors name the file and the expected form, never the content.
func LoadSecret(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gossip: secret file: %w", err)
	}
	text := strings.TrimSpace(string(raw))
	const want = "want 16, 24 or 32 bytes as hex (32, 48 or 64 digits) or base64 (e.g. `head -c 32 /dev/urandom | base64`)"
	if text == "" {
		return nil, fmt.Errorf("%w: %s is empty (%s)", ErrSecret, path, want)
	}
	okLen := func(n int) bool { return n == 16 || n == 24 || n == 32 }
	if isHex(text) {
		if len(text)%2 == 0 && okLen(len(text)/2) {
			return hex.DecodeString(text)
		}
		if len(text)%2 != 0 || !okLen(base64Len(text)) {
			return nil, fmt.Errorf("%w: %s holds %d hex digits (%s)", ErrSecret, path, len(text), want)
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := enc.DecodeString(text); err == nil {
			if !okLen(len(b)) {
				return nil, fmt.Errorf("%w: %s decodes from base64 to %d bytes (%s)", ErrSecret, path, len(b), want)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("%w: %s is neither hex nor base64 (%s)", ErrSecret, path, want)
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// base64Len is the decoded length of unpadded base64 text s.
func base64Len(s string) int { return base64.RawStdEncoding.DecodedLen(len(s)) }
