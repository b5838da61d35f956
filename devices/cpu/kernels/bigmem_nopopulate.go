//go:build unix && !linux

package kernels

// mapPopulate is bigmem_linux.go's; other systems fault pages in on use.
const mapPopulate = 0
