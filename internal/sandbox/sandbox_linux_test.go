package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/sandbox/trampoline"
	"github.com/agentd/agentd/internal/testenv"
)

// need skips t unless the kernel's Landlock has ABI abi or later.
func need(t *testing.T, abi int) {
	t.Helper()
	if ABI() < abi {
		testenv.Skip(t, testenv.Landlock(abi), "needs Landlock ABI "+strconv.Itoa(abi))
	}
}

// dir is a fresh directory by its real path.
func dir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sandboxAt is a sandbox that uses only what ABI abi knows, as on an
// older kernel.
func sandboxAt(t *testing.T, abi int, cfg Config) *Sandbox {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.abi = abi
	return s
}

// confined runs script with bash inside s under spec, in spec.Dir, with
// env added to the test's environment.
func confined(t *testing.T, s *Sandbox, spec Spec, script string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = spec.Dir
	cmd.Env = append(os.Environ(), env...)
	release, err := s.Wrap(cmd, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// TestWritesOnlyWhereGranted: whatever way a command takes (an absolute
// path, cd, a symlink in the workspace pointing out), it writes only in
// its workspace and its temporary directory, and still reads the system;
// on every ABI the kernel can emulate.
func TestWritesOnlyWhereGranted(t *testing.T) {
	need(t, 1)
	for v := 1; v <= ABI(); v++ {
		t.Run("abi"+strconv.Itoa(v), func(t *testing.T) {
			t.Parallel()
			ws, out := dir(t), dir(t)
			if err := os.WriteFile(filepath.Join(out, "existing.txt"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			s := sandboxAt(t, v, Config{})
			res, err := confined(t, s, Spec{Dir: ws}, `
				echo ok > inside.txt && mkdir -p a/b && echo ok > a/b/deep.txt
				echo x > "$OUT/abs.txt"
				(cd "$OUT" && echo x > cd.txt)
				ln -s "$OUT" link && echo x > link/sym.txt
				rm -f "$OUT/existing.txt"; chmod 777 "$OUT/existing.txt"
				echo temp > "$TMPDIR/t" && cat "$TMPDIR/t" && echo "tmp=$TMPDIR"
				head -c 4 /usr/bin/env | tail -c 3 && echo " read-usr"
				cat "$OUT/existing.txt" && echo read-outside
				git init -q . && git add inside.txt && git -c user.email=a@b -c user.name=a commit -qm m && git log --oneline | wc -l
				ls a/b; true`, "OUT="+out)
			if err != nil {
				t.Fatalf("%v: %s", err, res)
			}
			for _, f := range []string{"abs.txt", "cd.txt", "sym.txt"} {
				if exists(filepath.Join(out, f)) {
					t.Errorf("the command wrote %s outside its workspace", f)
				}
			}
			if !exists(filepath.Join(out, "existing.txt")) {
				t.Error("the command removed a file outside its workspace")
			}
			if !exists(filepath.Join(ws, "inside.txt")) || !exists(filepath.Join(ws, "a/b/deep.txt")) {
				t.Errorf("the command could not write its workspace: %s", res)
			}
			for _, want := range []string{"temp\n", "ELF read-usr", "read-outside", "\n1\n", "deep.txt"} {
				if !strings.Contains(res, want) {
					t.Errorf("output lacks %q: %s", want, res)
				}
			}
			_, tmp, _ := strings.Cut(res, "tmp=")
			tmp, _, _ = strings.Cut(tmp, "\n")
			if tmp == "" || strings.HasPrefix(tmp, ws) || exists(tmp) {
				t.Errorf("TMPDIR %q: want a private directory, removed after the command", tmp)
			}
		})
	}
	// Wrote nothing where the test cannot see: the test directories of
	// the subtests are their own.
	if err := os.WriteFile(filepath.Join(t.TempDir(), "parent"), nil, 0o600); err != nil {
		t.Errorf("the test process lost its own access: %v", err)
	}
}

// TestHidden: hidden places cannot be read or changed, even inside the
// workspace; the rest of the workspace stays usable, and a place the
// spec names readable inside a hidden directory is readable.
func TestHidden(t *testing.T) {
	need(t, 1)
	t.Parallel()
	ws, data := dir(t), dir(t)
	for name, body := range map[string]string{"agentd.db": "DBSECRET", "sub/keep.txt": "keep", "other/session/out.txt": "OTHER",
		"mine/out.txt": "MINE", "../sibling.txt": "SIBLING"} {
		p := filepath.Join(data, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(ws, "agentd.db")
	if err := os.WriteFile(db, []byte("WSDB"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := sandboxAt(t, ABI(), Config{Hidden: []string{data, db}})
	res, _ := confined(t, s, Spec{Dir: ws, Readable: []string{filepath.Join(data, "mine")}}, `
		cat "$DATA/agentd.db" "$DATA/other/session/out.txt" agentd.db
		echo x >> agentd.db; rm -f agentd.db; mv agentd.db sub/; ln agentd.db sub/hard
		echo x > "$DATA/new"
		cat "$DATA/mine/out.txt"; cat "$DATA/../sibling.txt"
		echo ok > sub/new.txt && cat sub/new.txt`, "DATA="+data)
	for _, secret := range []string{"DBSECRET", "OTHER", "WSDB"} {
		if strings.Contains(res, secret) {
			t.Errorf("a hidden file was read: %s", res)
		}
	}
	for _, want := range []string{"MINE", "SIBLING", "ok"} {
		if !strings.Contains(res, want) {
			t.Errorf("output lacks %q: %s", want, res)
		}
	}
	if b, err := os.ReadFile(db); err != nil || string(b) != "WSDB" {
		t.Errorf("the hidden file in the workspace changed: %q, %v", b, err)
	}
	if exists(filepath.Join(data, "new")) || exists(filepath.Join(ws, "sub", "hard")) {
		t.Error("the command wrote into a hidden place")
	}
	if got := s.Overlaps(ws); len(got) != 1 || !strings.Contains(got[0], db) {
		t.Errorf("Overlaps(%s) = %q", ws, got)
	}
}

// TestServerUnreachable: a confined command can read neither the
// environment nor the memory of the process that started it (of any of
// its threads), and cannot signal it.
func TestServerUnreachable(t *testing.T) {
	need(t, 6)
	t.Parallel()
	s := sandboxAt(t, ABI(), Config{})
	pid := strconv.Itoa(os.Getpid())
	res, _ := confined(t, s, Spec{Dir: dir(t)}, `
		for f in /proc/$P/environ /proc/$P/task/*/environ /proc/$P/mem; do head -c 64 "$f" && echo "READ $f"; done
		for t in /proc/$P/task/*; do kill -0 "${t##*/}" 2>/dev/null && echo "SIGNALLED ${t##*/}"; done
		kill -URG $P 2>/dev/null && echo SIGNALLED
		sleep 5 & kill $! && echo "own child signalled"
		grep -q MARKER=secret /proc/self/environ && echo own-environ`, "P="+pid, "MARKER=secret")
	if strings.Contains(res, "READ") || strings.Contains(res, "SIGNALLED") {
		t.Errorf("the command reached the server: %s", res)
	}
	if !strings.Contains(res, "own child signalled") || !strings.Contains(res, "own-environ") {
		t.Errorf("the command lost what is its own: %s", res)
	}
}

// TestCapabilitiesDropped: a root server's commands lose what reaches
// around Landlock.
func TestCapabilitiesDropped(t *testing.T) {
	need(t, 1)
	if os.Geteuid() != 0 {
		t.Skip("the capabilities are a root server's")
	}
	t.Parallel()
	s := sandboxAt(t, ABI(), Config{DenyNetwork: true})
	res, err := confined(t, s, Spec{Dir: dir(t)}, `grep -E '^Cap(Bnd|Eff|Inh):' /proc/self/status`)
	if err != nil {
		t.Fatalf("%v: %s", err, res)
	}
	for _, line := range strings.Split(strings.TrimSpace(res), "\n") {
		name, hex, _ := strings.Cut(line, ":")
		set, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		for _, c := range append([]int{13}, trampoline.Dangerous...) { // 13: CAP_NET_RAW
			if set&(1<<c) != 0 {
				t.Errorf("%s holds capability %d", name, c)
			}
		}
	}
}

// TestNetwork: with the network denied, a command cannot connect to a
// listener on 127.0.0.1; by default it can.
func TestNetwork(t *testing.T) {
	need(t, 4)
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	defer func() { ln.Close(); <-accepted }()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	script := `exec 3<>/dev/tcp/127.0.0.1/$PORT && echo connected`
	for _, deny := range []bool{true, false} {
		res, _ := confined(t, sandboxAt(t, ABI(), Config{DenyNetwork: deny}), Spec{Dir: dir(t)}, script, "PORT="+port)
		if got := strings.Contains(res, "connected"); got == deny {
			t.Errorf("network denied %v: %s", deny, res)
		}
	}
}

// TestAbstractSocketScoped: a confined command cannot connect to the
// server's abstract unix sockets.
func TestAbstractSocketScoped(t *testing.T) {
	need(t, 6)
	t.Parallel()
	name := "@agentd-sandbox-test-" + strconv.Itoa(os.Getpid())
	ln, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	defer func() { ln.Close(); <-done }()
	for _, s := range []*Sandbox{nil, sandboxAt(t, ABI(), Config{})} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDialHelper$")
		cmd.Env = append(os.Environ(), "SANDBOX_DIAL="+name)
		release, err := s.Wrap(cmd, Spec{Dir: dir(t)})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := cmd.CombinedOutput()
		release()
		if got := strings.Contains(string(out), "DIALED"); got != (s == nil) {
			t.Errorf("confined %v: %s", s != nil, out)
		}
	}
}

// TestDialHelper is the client of TestAbstractSocketScoped.
func TestDialHelper(t *testing.T) {
	name := os.Getenv("SANDBOX_DIAL")
	if name == "" {
		return
	}
	c, err := net.Dial("unix", name)
	if err != nil {
		t.Log(err)
		return
	}
	c.Close()
	os.Stdout.WriteString("DIALED\n")
}

// TestPdeathsigKept: the command still dies with the process that started
// it (the trampoline's exec keeps the parent-death signal), as the bash
// tool's containment expects. The starting process is a helper (this
// test binary) killed with SIGKILL: a thread of this process cannot stand
// for it, since Go keeps the main thread alive when a locked goroutine
// that ran on it ends, and the signal would then never come.
func TestPdeathsigKept(t *testing.T) {
	need(t, 1)
	t.Parallel()
	helper := exec.Command(os.Args[0], "-test.run=^TestPdeathsigHelper$")
	helper.Env = append(os.Environ(), "SANDBOX_PDEATH_DIR="+dir(t))
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer helper.Wait()
	defer helper.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		t.Fatalf("helper said %q: %v %v", line, err, perr)
	}
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("the command outlived the process that started it")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPdeathsigHelper is the starting process of TestPdeathsigKept: it
// starts a confined sleep with a parent-death signal, prints its pid, and
// waits to be killed.
func TestPdeathsigHelper(t *testing.T) {
	d := os.Getenv("SANDBOX_PDEATH_DIR")
	if d == "" {
		return
	}
	s := sandboxAt(t, ABI(), Config{})
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if _, err := s.Wrap(cmd, Spec{Dir: d}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Println(cmd.Process.Pid)
	time.Sleep(time.Minute)
	cmd.Process.Kill()
	t.Fatal("not killed")
}

// alive reports whether pid is a process that has not ended (a zombie
// has).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// TestTrampolineFailsClosed: a trampoline that cannot confine itself does
// not run the command.
func TestTrampolineFailsClosed(t *testing.T) {
	need(t, 1)
	t.Parallel()
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{trampoline.Name, "99", "-", "/bin/sh", "sh", "-c", "echo RAN"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 126 || strings.Contains(string(out), "RAN") ||
		!strings.Contains(string(out), "agentd sandbox:") {
		t.Errorf("%v: %s", err, out)
	}
}

// TestParentUnconfined: confining commands leaves the server's threads as
// they were.
func TestParentUnconfined(t *testing.T) {
	need(t, 1)
	s := sandboxAt(t, ABI(), Config{})
	for range 3 {
		if res, err := confined(t, s, Spec{Dir: dir(t)}, "true"); err != nil {
			t.Fatalf("%v: %s", err, res)
		}
	}
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) == 0 {
		t.Fatal(tasks, err)
	}
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), "NoNewPrivs:\t1") {
			t.Errorf("%s: a thread of the server has no_new_privs", p)
		}
	}
	if err := os.WriteFile(filepath.Join(os.TempDir(), "agentd-sandbox-parent-"+strconv.Itoa(os.Getpid())), nil, 0o600); err != nil {
		t.Errorf("the server lost its access: %v", err)
	}
	os.Remove(filepath.Join(os.TempDir(), "agentd-sandbox-parent-"+strconv.Itoa(os.Getpid())))
}
