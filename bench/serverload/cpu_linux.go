package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// userHZ is the unit of /proc's CPU times: USER_HZ, 100 on every Linux
// architecture Go runs on (the kernel exports times in it whatever its HZ).
const userHZ = 100

// cpuSample is the machine's busy CPU time and that of the server and of
// this process, in seconds.
type cpuSample struct {
	busy, server, self float64
}

// sampleCPU reads /proc: the machine's busy time (user, nice, system, irq,
// softirq and steal of /proc/stat's cpu line) and the CPU time of process
// pid (all its threads; none where pid is 0) and of this one.
func sampleCPU(pid int) (cpuSample, error) {
	var s cpuSample
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return s, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return s, fmt.Errorf("/proc/stat: field %d of %q: %w", i, line, err)
		}
		s.busy += v / userHZ
	}
	if s.self, err = processCPU("self"); err != nil {
		return s, err
	}
	if pid > 0 {
		if s.server, err = processCPU(strconv.Itoa(pid)); err != nil {
			return s, err
		}
	}
	return s, nil
}

// processCPU is the user and system time of /proc/PID/stat, in seconds.
func processCPU(pid string) (float64, error) {
	path := "/proc/" + pid + "/stat"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: the fields that
	// follow its last ')' start with the state (field 3), so utime and
	// stime (fields 14 and 15) are the 12th and 13th of them.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("%s: unexpected contents %q", path, clip(string(b)))
	}
	var t float64
	for _, s := range f[11:13] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		t += v / userHZ
	}
	return t, nil
}
