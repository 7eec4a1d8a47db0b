package redislock

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The same lock shared with PHP and Python processes (tests/holders/): each
// excludes the other on the same key, and a release there hands the lock to
// a Go waiter (no polling). PHP loads the C library of `cargo build`
// ($REDISLOCK_LIB); Python is the test environment's ($PYTHON, or
// target/venv-test of `make python-env`, which make test-go makes).
func holderCommand(t *testing.T, lang string, args ...string) *exec.Cmd {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	var cmd *exec.Cmd
	switch lang {
	case "php":
		php, err := exec.LookPath("php")
		if err != nil {
			t.Fatal("php not found: make deps installs it")
		}
		cmd = exec.Command(php, append([]string{filepath.Join(root, "tests/holders/holder.php")}, args...)...)
	case "python":
		py := os.Getenv("PYTHON")
		if py == "" {
			py = filepath.Join(root, "target/venv-test/bin/python")
		}
		if _, err := os.Stat(py); err != nil {
			t.Fatalf("no Python environment with the wheel at %s: make python-env (make test-go does), or set PYTHON", py)
		}
		cmd = exec.Command(py, append([]string{filepath.Join(root, "tests/holders/holder.py")}, args...)...)
	}
	lib := os.Getenv("REDISLOCK_LIB")
	if lib == "" {
		lib = filepath.Join(root, "target/debug/libredislock.so")
	}
	cmd.Env = append(os.Environ(), "REDISLOCK_LIB="+lib)
	return cmd
}

func TestOtherLanguages(t *testing.T) {
	for _, lang := range []string{"php", "python"} {
		t.Run("a "+lang+" holder excludes Go and hands the lock over", func(t *testing.T) {
			s := startServer(t)
			c := open(t, s)
			ctx := context.Background()
			key := "cross-" + lang
			cmd := holderCommand(t, lang, s.URL(), key)
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer stdin.Close()
			out := bufio.NewReader(stdout)
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatalf("the %s holder printed nothing: %v", lang, err)
			}
			token, err := hex.DecodeString(strings.TrimSpace(line))
			if err != nil || s.Must(t, "GET", key) != string(token) {
				t.Fatalf("the key does not hold the %s holder's token %q", lang, line)
			}
			if _, err := c.TryAcquire(ctx, key); !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("held by %s: %v", lang, err)
			}
			got := make(chan *Lock, 1)
			go func() {
				l, err := c.Acquire(ctx, key, TTL(5*time.Second), Wait(time.Minute))
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			waitFor(t, "the Go waiter is queued", func() bool {
				st, _ := c.Stats()
				return st.WaitersNow == 1
			})
			stdin.Write([]byte("release\n"))
			l := <-got
			if l == nil {
				t.FailNow()
			}
			if rest, _ := out.ReadString('\n'); rest == "" {
				t.Fatal("the holder said nothing after its release")
			}
			if st, _ := c.Stats(); st.AcquiredHandedOver != 1 {
				t.Fatalf("the %s release did not hand the lock over: %+v", lang, st)
			}
			if s.Must(t, "GET", key) != string(l.Token()) {
				t.Fatal("the key does not hold the Go waiter's token")
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("a Go holder excludes "+lang, func(t *testing.T) {
			s := startServer(t)
			c := open(t, s)
			ctx := context.Background()
			try := func() string {
				out, err := holderCommand(t, lang, s.URL(), "try:cross").Output()
				if err != nil {
					t.Fatalf("the %s try: %v", lang, err)
				}
				return strings.TrimSpace(string(out))
			}
			l, err := c.Acquire(ctx, "cross", TTL(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if got := try(); got != "held" {
				t.Fatalf("%s says %q while Go holds it", lang, got)
			}
			l.Release(ctx)
			if got := try(); got != "free" {
				t.Fatalf("%s says %q once Go released it", lang, got)
			}
		})
	}
}
