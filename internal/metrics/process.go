package metrics

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

// runtimeCollector exports the Go runtime's and the process's figures
// under the names and help texts of client_golang's Go and process
// collectors (go_*, process_*), which dashboards and alerts already use.
type runtimeCollector struct{}

func gauge(name, help string, v float64) snapshot {
	return constFamily(name, help, gaugeKind, nil, sample{value: v})
}

func counter(name, help string, v float64) snapshot {
	return constFamily(name, help, counterKind, nil, sample{value: v})
}

// Collect reads the runtime's memory statistics (a short stop of the
// world, as client_golang's reading of runtime/metrics is not) and
// /proc/self.
func (runtimeCollector) Collect() []snapshot {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	out := goFamilies(&ms)
	return append(out, processFamilies()...)
}

func goFamilies(ms *runtime.MemStats) []snapshot {
	gc := debug.GCStats{PauseQuantiles: make([]time.Duration, len(summaryQuantiles))}
	debug.ReadGCStats(&gc)
	quantiles := make([]float64, len(gc.PauseQuantiles))
	for i, d := range gc.PauseQuantiles {
		quantiles[i] = d.Seconds()
	}
	threads, _ := runtime.ThreadCreateProfile(nil)
	const eq = " Equals to "
	return []snapshot{
		constFamily("go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.",
			summaryKind, nil, sample{quantiles: quantiles, sum: gc.PauseTotal.Seconds(), count: uint64(gc.NumGC)}),
		gauge("go_gc_gogc_percent", "Heap size target percentage configured by the user, otherwise 100. This value is set by the GOGC environment variable, and the runtime/debug.SetGCPercent function. Sourced from /gc/gogc:percent.", gogcPercent()),
		gauge("go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64. This value is set by the GOMEMLIMIT environment variable, and the runtime/debug.SetMemoryLimit function. Sourced from /gc/gomemlimit:bytes.", float64(debug.SetMemoryLimit(-1))),
		gauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine())),
		constFamily("go_info", "Information about the Go environment.", gaugeKind, []string{"version"}, sample{values: []string{runtime.Version()}, value: 1}),
		gauge("go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use."+eq+"/memory/classes/heap/objects:bytes.", float64(ms.HeapAlloc)),
		counter("go_memstats_alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already."+eq+"/gc/heap/allocs:bytes.", float64(ms.TotalAlloc)),
		gauge("go_memstats_buck_hash_sys_bytes", "Number of bytes used by the profiling bucket hash table."+eq+"/memory/classes/profiling/buckets:bytes.", float64(ms.BuckHashSys)),
		counter("go_memstats_frees_total", "Total number of heap objects frees."+eq+"/gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.", float64(ms.Frees)),
		gauge("go_memstats_gc_sys_bytes", "Number of bytes used for garbage collection system metadata."+eq+"/memory/classes/metadata/other:bytes.", float64(ms.GCSys)),
		gauge("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes."+eq+"/memory/classes/heap/objects:bytes.", float64(ms.HeapAlloc)),
		gauge("go_memstats_heap_idle_bytes", "Number of heap bytes waiting to be used."+eq+"/memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", float64(ms.HeapIdle)),
		gauge("go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use."+eq+"/memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", float64(ms.HeapInuse)),
		gauge("go_memstats_heap_objects", "Number of currently allocated objects."+eq+"/gc/heap/objects:objects.", float64(ms.HeapObjects)),
		gauge("go_memstats_heap_released_bytes", "Number of heap bytes released to OS."+eq+"/memory/classes/heap/released:bytes.", float64(ms.HeapReleased)),
		gauge("go_memstats_heap_sys_bytes", "Number of heap bytes obtained from system."+eq+"/memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", float64(ms.HeapSys)),
		gauge("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", float64(gc.LastGC.UnixNano())/1e9),
		counter("go_memstats_mallocs_total", "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge."+eq+"/gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.", float64(ms.Mallocs)),
		gauge("go_memstats_mcache_inuse_bytes", "Number of bytes in use by mcache structures."+eq+"/memory/classes/metadata/mcache/inuse:bytes.", float64(ms.MCacheInuse)),
		gauge("go_memstats_mcache_sys_bytes", "Number of bytes used for mcache structures obtained from system."+eq+"/memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.", float64(ms.MCacheSys)),
		gauge("go_memstats_mspan_inuse_bytes", "Number of bytes in use by mspan structures."+eq+"/memory/classes/metadata/mspan/inuse:bytes.", float64(ms.MSpanInuse)),
		gauge("go_memstats_mspan_sys_bytes", "Number of bytes used for mspan structures obtained from system."+eq+"/memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.", float64(ms.MSpanSys)),
		gauge("go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place."+eq+"/gc/heap/goal:bytes.", float64(ms.NextGC)),
		gauge("go_memstats_other_sys_bytes", "Number of bytes used for other system allocations."+eq+"/memory/classes/other:bytes.", float64(ms.OtherSys)),
		gauge("go_memstats_stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments."+eq+"/memory/classes/heap/stacks:bytes.", float64(ms.StackInuse)),
		gauge("go_memstats_stack_sys_bytes", "Number of bytes obtained from system for stack allocator."+eq+"/memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.", float64(ms.StackSys)),
		gauge("go_memstats_sys_bytes", "Number of bytes obtained from system."+eq+"/memory/classes/total:byte.", float64(ms.Sys)),
		gauge("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously. Sourced from /sched/gomaxprocs:threads.", float64(runtime.GOMAXPROCS(0))),
		gauge("go_threads", "Number of OS threads created.", float64(threads)),
	}
}

// gogcPercent is the GC's target percentage as the runtime read it from
// GOGC (agentd never changes it, so it is read once): -1 for off.
var gogcPercent = sync.OnceValue(readGOGC)

func readGOGC() float64 {
	switch v := os.Getenv("GOGC"); v {
	case "":
		return 100
	case "off":
		return -1
	default:
		n, err := strconv.Atoi(v)
		if err != nil {
			return 100
		}
		return float64(n)
	}
}

// processFamilies reads /proc/self as client_golang's process collector
// does; what cannot be read (not Linux) is left out.
func processFamilies() []snapshot {
	var out []snapshot
	if st, ok := readStat(); ok {
		out = append(out,
			counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", st.cpu),
			gauge("process_resident_memory_bytes", "Resident memory size in bytes.", st.rss),
			gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", st.vsize))
		if st.start > 0 {
			out = append(out, gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", st.start))
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		// The directory's own descriptor, open while it is read, counts,
		// as it does in client_golang's figure.
		out = append(out, gauge("process_open_fds", "Number of open file descriptors.", float64(len(fds))))
	}
	if files, vsize, ok := readLimits(); ok {
		out = append(out,
			gauge("process_max_fds", "Maximum number of open file descriptors.", files),
			gauge("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", vsize))
	}
	if in, out2, ok := readNetstat(); ok {
		out = append(out,
			counter("process_network_receive_bytes_total", "Number of bytes received by the process over the network.", in),
			counter("process_network_transmit_bytes_total", "Number of bytes sent by the process over the network.", out2))
	}
	return out
}

type procStat struct{ cpu, rss, vsize, start float64 }

// userHz is the kernel's clock tick for /proc times (USER_HZ, 100 on
// every Linux architecture Go runs on).
const userHz = 100

func readStat() (procStat, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name may hold spaces; the fields start after its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14, stime 15, starttime
	// 22, vsize 23, rss 24.
	if len(f) < 22 {
		return procStat{}, false
	}
	num := func(field int) float64 {
		n, _ := strconv.ParseFloat(f[field-3], 64)
		return n
	}
	st := procStat{cpu: (num(14) + num(15)) / userHz, vsize: num(23), rss: num(24) * float64(os.Getpagesize())}
	if boot := bootTime(); boot > 0 {
		st.start = boot + num(22)/userHz
	}
	return st, true
}

// bootTime is the btime line of /proc/stat, in seconds since the epoch;
// read once, as it cannot change while the process lives.
var bootTime = sync.OnceValue(readBootTime)

func readBootTime() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return n
		}
	}
	return 0
}

// readLimits reads the soft limits on open files and address space.
func readLimits() (files, vsize float64, ok bool) {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return 0, 0, false
	}
	limit := func(rest string) float64 {
		// "Max open files  1024  4096  files": the soft limit is the
		// first field after the name.
		f := strings.Fields(rest)
		if len(f) == 0 || f[0] == "unlimited" {
			return float64(^uint64(0))
		}
		n, _ := strconv.ParseFloat(f[0], 64)
		return n
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			files = limit(rest)
		} else if rest, ok := strings.CutPrefix(line, "Max address space"); ok {
			vsize = limit(rest)
		}
	}
	return files, vsize, true
}

// readNetstat reads the bytes received and sent in the process's network
// namespace (IpExt's InOctets and OutOctets).
func readNetstat() (in, out float64, ok bool) {
	b, err := os.ReadFile("/proc/self/net/netstat")
	if err != nil {
		return 0, 0, false
	}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i++ {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != "IpExt:" || len(values) != len(names) || values[0] != "IpExt:" {
			continue
		}
		for j, n := range names {
			v, _ := strconv.ParseFloat(values[j], 64)
			switch n {
			case "InOctets":
				in = v
			case "OutOctets":
				out = v
			}
		}
		return in, out, true
	}
	return 0, 0, false
}
