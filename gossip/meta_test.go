package gossip

import (
	"testing"
)

func TestMeta(t *testing.T) {
	for _, inc := range []uint64{0, 1, 127, 128, 1 << 20, 1 << 40, 1<<64 - 1} {
		for _, leaving := range []bool{false, true} {
			gi, gl, ok := decodeMeta(encodeMeta(inc, leaving))
			if !ok || gi != inc || gl != leaving {
				t.Fatalf("decodeMeta(encodeMeta(%d, %v)) = %d, %v, %v", inc, leaving, gi, gl, ok)
			}
		}
	}
	for _, b := range [][]byte{nil, {0x93}, {0x92, 0x01, 0x01}, {0x93, 0x02, 0x01, 0xc2}, {0x93, 0x01, 0x01, 0x01}, append(encodeMeta(1, false), 0)} {
		if _, _, ok := decodeMeta(b); ok {
			t.Fatalf("decodeMeta(% x) accepted", b)
		}
	}
}
