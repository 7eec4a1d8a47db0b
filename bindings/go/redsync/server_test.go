package redsync

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testServer is a throwaway redis-server on a free loopback port (never
// 6379), as in the parent package's tests (whose helper a test of another
// package cannot import): $REDIS_SERVER chooses the binary, redis-server
// by default.
type testServer struct {
	cmd    *exec.Cmd
	port   int
	exited chan struct{}
}

func serverBin(t testing.TB) string {
	name := os.Getenv("REDIS_SERVER")
	if name == "" {
		name = "redis-server"
	}
	if strings.Contains(name, "/") && !filepath.IsAbs(name) {
		name = filepath.Join("..", "..", "..", name)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: apt-get install redis-server (make deps does), or set REDIS_SERVER", name)
	}
	return path
}

func freePort(t testing.TB) int {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port != 6379 {
			return port
		}
	}
}

func startServer(t testing.TB) *testServer {
	t.Helper()
	bin := serverBin(t)
	dir := t.TempDir()
	for attempt := 0; attempt < 20; attempt++ {
		s := &testServer{port: freePort(t)}
		s.cmd = exec.Command(bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--logfile", "redis.log", "--daemonize", "no")
		if err := s.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		s.exited = exited
		go func() { s.cmd.Wait(); close(exited) }()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				deadline = time.Time{} // the port was taken: another one
				continue
			default:
			}
			if r, err := s.do("PING"); err == nil && r == "PONG" {
				t.Cleanup(func() { s.cmd.Process.Kill(); <-s.exited })
				return s
			}
			time.Sleep(10 * time.Millisecond)
		}
		s.cmd.Process.Kill()
		<-exited
	}
	t.Fatal("could not start redis-server on a free port")
	return nil
}

func (s *testServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// do sends one command over a connection of its own and returns its reply
// ("<nil>" for a nil bulk string).
func (s *testServer) do(args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%s", line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "<nil>", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

func (s *testServer) must(t testing.TB, args ...string) string {
	t.Helper()
	r, err := s.do(args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}
