package tcp

import (
	"net"
	"os"
	"syscall"
)

// localAddr returns the address bound by the listener fd (a dup, closed here).
func localAddr(fd int) (net.Addr, error) {
	defer syscall.Close(fd)
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return nil, os.NewSyscallError("getsockname", err)
	}
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}, nil
	case *syscall.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}, nil
	}
	return nil, syscall.EAFNOSUPPORT
}
