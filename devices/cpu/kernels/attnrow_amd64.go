//go:build amd64 && !purego

package kernels

//go:noescape
func attnRow64(q *float32, k, v *uint16, stride, n int, scale float32, st *float32, tab *uint64)

//go:noescape
func attnRow128(q *float32, k, v *uint16, stride, n int, scale float32, st *float32, tab *uint64)

//go:noescape
func attnRow64x2(q *float32, k, v *uint16, stride, n int, scale float32, st *float32, tab *uint64)

func init() {
	if hasAVX512 && hasAVX512VNNI {
		attnRowAsm = func(q []float32, k, v []uint16, stride, n int, scale float32, st []float32, tab *[32]uint64) bool {
			hd := len(q)
			if n == 0 {
				return true
			}
			_, _ = k[(n-1)*stride+hd-1], v[(n-1)*stride+hd-1]
			_ = st[2+hd-1]
			switch hd {
			case 64:
				attnRow64(&q[0], &k[0], &v[0], stride, n, scale, &st[0], &tab[0])
			case 128:
				attnRow128(&q[0], &k[0], &v[0], stride, n, scale, &st[0], &tab[0])
			default:
				return false
			}
			return true
		}
		attnRow2Asm = func(q []float32, k, v []uint16, stride, n int, scale float32, st []float32, tab *[32]uint64) bool {
			hd := len(q) / 2
			if hd != 64 {
				return false
			}
			if n == 0 {
				return true
			}
			_, _ = k[(n-1)*stride+hd-1], v[(n-1)*stride+hd-1]
			_ = st[2*(2+hd)-1]
			attnRow64x2(&q[0], &k[0], &v[0], stride, n, scale, &st[0], &tab[0])
			return true
		}
	}
}
