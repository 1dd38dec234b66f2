package trampoline

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestNumbers: the numbers written out here are Linux's.
func TestNumbers(t *testing.T) {
	want := []int{unix.CAP_SYS_ADMIN, unix.CAP_SYS_MODULE, unix.CAP_SYS_RAWIO, unix.CAP_SYS_BOOT, unix.CAP_SYS_PTRACE,
		unix.CAP_PERFMON, unix.CAP_BPF, unix.CAP_SYS_TIME, unix.CAP_MAC_OVERRIDE, unix.CAP_MAC_ADMIN, unix.CAP_NET_ADMIN,
		unix.CAP_SYSLOG, unix.CAP_AUDIT_CONTROL, unix.CAP_AUDIT_READ, unix.CAP_CHECKPOINT_RESTORE, unix.CAP_LINUX_IMMUTABLE,
		unix.CAP_MKNOD, unix.CAP_SYS_PACCT, unix.CAP_SYS_TTY_CONFIG, unix.CAP_WAKE_ALARM, unix.CAP_BLOCK_SUSPEND,
		unix.CAP_DAC_READ_SEARCH, unix.CAP_SETFCAP, unix.CAP_SETPCAP}
	if len(want) != len(Dangerous) {
		t.Fatalf("%d capabilities, want %d", len(Dangerous), len(want))
	}
	for i, c := range want {
		if Dangerous[i] != c {
			t.Errorf("capability %d is %d, want %d", i, Dangerous[i], c)
		}
	}
	for _, c := range []struct{ got, want int }{
		{sysLandlockRestrictSelf, unix.SYS_LANDLOCK_RESTRICT_SELF}, {prCapbsetDrop, unix.PR_CAPBSET_DROP},
		{prSetNoNewPrivs, unix.PR_SET_NO_NEW_PRIVS}, {prCapAmbient, unix.PR_CAP_AMBIENT},
		{prCapAmbientClearAll, unix.PR_CAP_AMBIENT_CLEAR_ALL}, {capSetpcap, unix.CAP_SETPCAP}, {capNetRaw, unix.CAP_NET_RAW},
		{linuxCapabilityVersion3, unix.LINUX_CAPABILITY_VERSION_3},
	} {
		if c.got != c.want {
			t.Errorf("%d, want %d", c.got, c.want)
		}
	}
}
