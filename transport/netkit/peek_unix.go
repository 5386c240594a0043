//go:build unix

package netkit

import "syscall"

// peek reports whether the socket fd holds a byte not read yet.
func peek(fd int) bool {
	var b [1]byte
	n, _, err := syscall.Recvfrom(fd, b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err == nil && n > 0
}
